//! nginx caches for the cache accounting and plan tests: one nginx origin
//! whose responses are cacheable, and nginx `proxy_cache` instances in
//! front of it that say what they did (an RFC 9211 `Cache-Status` member,
//! or `X-Cache`), each logging `$request_uri $upstream_cache_status`.

use std::net::SocketAddr;
use std::path::Path;

use super::tls::Nginx;

/// The origin: every response cacheable for 10 minutes, with a
/// `Cache-Status` member of its own (a shield in front of it, say).
pub fn origin(dir: &Path) -> Nginx {
    let log = dir.join("origin.log");
    Nginx::start(move |addr| {
        format!(
            "log_format o '$request_uri';
  server {{
    listen {addr};
    access_log {} o;
    location / {{
      add_header Cache-Control \"max-age=600\";
      add_header Cache-Status \"OriginShield; fwd=uri-miss\";
      return 200 \"origin $request_uri\\n\";
    }}
  }}",
            log.display()
        )
    })
}

/// A cache in front of `origin`, logging `$request_uri
/// $upstream_cache_status` per request. `rfc`: it adds a `Cache-Status`
/// member (RFC 9211) for its result; else `X-Cache: $upstream_cache_status`.
pub fn cache(dir: &Path, i: usize, origin: SocketAddr, rfc: bool) -> Nginx {
    let (log, store) = (
        dir.join(format!("cache{i}.log")),
        dir.join(format!("cache{i}")),
    );
    let header = if rfc {
        format!(
            "map $upstream_cache_status $cs{i} {{ HIT \"cache{i}; hit\"; STALE \"cache{i}; hit\"; UPDATING \"cache{i}; hit\"; MISS \"cache{i}; fwd=miss\"; EXPIRED \"cache{i}; fwd=stale\"; REVALIDATED \"cache{i}; fwd=stale\"; BYPASS \"cache{i}; fwd=bypass\"; default \"\"; }}"
        )
    } else {
        String::new()
    };
    let add = if rfc {
        format!("add_header Cache-Status $cs{i} always;")
    } else {
        "add_header X-Cache $upstream_cache_status always;".to_string()
    };
    Nginx::start(move |addr| {
        format!(
            "proxy_cache_path {} keys_zone=c{i}:1m;
  log_format c{i} '$request_uri $upstream_cache_status';
  {header}
  server {{
    listen {addr};
    access_log {} c{i};
    location = /health {{ access_log off; return 200 \"ok\\n\"; }}
    location / {{
      proxy_pass http://{origin};
      proxy_cache c{i};
      proxy_cache_valid 200 10m;
      proxy_cache_bypass $http_x_bypass;
      {add}
    }}
  }}",
            store.display(),
            log.display()
        )
    })
}
