//! Every configuration key with its default and what it does: the one
//! source of the router guide's key table (`docs/router.md`, between its
//! `keys:begin`/`keys:end` markers) and of the `ketama-router.toml(5)` man
//! page, so neither can drift from the other. A test checks that every
//! field of [`crate::model`] is listed here and that the guide's table is
//! this one.

/// One key of the configuration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// The section (`server`, `[backends]` for an array of tables).
    pub section: &'static str,
    /// The key within it.
    pub key: &'static str,
    /// Its default, as written in TOML (`-`: required or absent).
    pub default: &'static str,
    /// What it does.
    pub what: &'static str,
}

const fn k(
    section: &'static str,
    key: &'static str,
    default: &'static str,
    what: &'static str,
) -> KeyDoc {
    KeyDoc {
        section,
        key,
        default,
        what,
    }
}

/// Every key, section by section, in the order of the file's sections.
pub const KEYS: &[KeyDoc] = &[
    k("server", "listen", "[\"127.0.0.1:8080\"]", "proxy listeners, IP:PORT each (restart to change)"),
    k("server", "threads", "1", "worker threads (restart to change)"),
    k("server", "work_stealing", "false", "let idle threads take others' connections (restart to change)"),
    k("server", "retries", "2", "failovers to the next backend in ring order after a failed attempt"),
    k("server", "response_headers", "true", "add x-ketama-backend and x-ketama-ring to responses"),
    k("server", "forwarded_headers", "true", "add X-Forwarded-For and X-Forwarded-Proto to proxied requests"),
    k("server", "trace_sample", "0.0", "share of requests whose selection is logged (key hash, ring, backend, attempts, status)"),
    k("server", "grace_period_seconds", "1", "how long a graceful stop waits for requests in flight (restart to change)"),
    k("server", "upstream_keepalive_pool_size", "128", "idle upstream connections kept per process (restart to change)"),
    k("server", "upgrade_sock", "-", "the Unix socket a graceful upgrade hands the listeners over, in a directory closed to other users (default: upgrade.sock in systemd's RUNTIME_DIRECTORY; else none, and --upgrade is refused)"),
    k("server", "max_header_bytes", "32768", "largest request head; over it: 431 (1024 to 1048576)"),
    k("server", "client_header_timeout_ms", "60000", "the whole request head must arrive within it; else 408"),
    k("server", "keepalive_timeout_ms", "75000", "an idle kept-alive client connection is closed after it"),
    k("server", "keepalive_requests", "1000", "streams one HTTP/2 connection may open; then GOAWAY and the client opens another (nginx's keepalive_requests)"),
    k("server", "keepalive_time_ms", "3600000", "the longest life of an HTTP/2 connection; then GOAWAY, its open streams finished (nginx's keepalive_time)"),
    k("server", "grpc_timeout_max_ms", "-", "the cap on a gRPC call's deadline, its grpc-timeout (absent: no cap; Envoy's grpc_timeout_header_max)"),
    k("server", "client_body_timeout_ms", "60000", "longest wait between two reads of a request body; else 408"),
    k("server", "send_timeout_ms", "60000", "longest wait for a client to take response bytes (restarts whenever it takes some); else the connection is closed (HTTP/1) or the stream reset (HTTP/2)"),
    k("server", "max_connections", "-", "client connections at once; past it new ones are closed (default: half of what the file limit leaves after a reserve)"),
    k("server", "connect_timeout_ms", "1000", "backend connect timeout; a timeout fails over"),
    k("server", "read_timeout_ms", "60000", "longest wait for backend response bytes; else 504"),
    k("server", "write_timeout_ms", "60000", "longest wait to write the request to a backend"),
    k("server", "max_fails", "1", "failures within fail_timeout_ms that take a backend out of rotation (0: off)"),
    k("server", "fail_timeout_ms", "10000", "the failure window, and how long a failed backend stays out"),
    k("server", "h2c", "false", "plain listeners also take HTTP/2 with prior knowledge (h2c)"),
    k("server", "pipelining", "true", "answer HTTP/1.1 requests a client pipelines, in order, one at a time, as nginx does (false: close after the first answer)"),
    k("server", "h2_max_concurrent_streams", "128", "streams open at once on one HTTP/2 connection, plain or TLS (a reload applies to new connections)"),
    k("server", "underscores_in_headers", "false", "request header names may hold _ (false: such a field is ignored, neither routed on nor forwarded, as nginx's underscores_in_headers off)"),
    k("server", "strip_request_headers", "[]", "request header names removed before routing and forwarding (any case), e.g. [\"x-ketama-fill\"]: fields a client may not send through the router"),
    k("server", "body_buffer_bytes", "262144", "bytes each HTTP/1 body read asks for, from backends and clients; a body of known length takes no more than itself and one byte (16384 to 16777216)"),
    k("tls", "listen", "-", "TLS listeners, IP:PORT each (restart to change; absent [tls]: none)"),
    k("tls", "alpn", "[\"h2\", \"http/1.1\"]", "protocols offered by ALPN, in preference order"),
    k("tls", "min_version", "\"1.2\"", "the lowest TLS version: \"1.2\" or \"1.3\""),
    k("tls", "handshake_timeout_ms", "10000", "a TLS handshake must finish within it after the accept; else the connection is closed"),
    k("tls", "client_ca_file", "-", "mutual TLS: clients must present a certificate this CA (PEM) signed"),
    k("tls", "session_resumption", "true", "TLS session tickets and the session cache (false: every connection makes a full handshake)"),
    k("[tls.certificates]", "cert_file", "-", "PEM certificate chain, leaf first; chosen when the client's SNI matches one of its DNS names (the first certificate is the default)"),
    k("[tls.certificates]", "key_file", "-", "its PEM private key (PKCS#8, SEC1 or PKCS#1)"),
    k("access_log", "path", "-", "the access log: a file (appended to; SIGUSR1 reopens it) or \"-\" for standard output (absent [access_log]: none)"),
    k("access_log", "format", "\"json\"", "json (one object per line) or combined (nginx's, with the backend appended)"),
    k("access_log", "buffer_bytes", "65536", "lines waiting for the writer at most; past it lines are dropped and counted (4096 to 1073741824)"),
    k("access_log", "flush_ms", "1000", "how often waiting lines are written (sooner when the buffer is half full; 1 to 60000)"),
    k("admin", "listen", "-", "the admin API's address, loopback only (restart to change)"),
    k("admin", "token", "-", "the bearer token the admin API requires"),
    k("admin", "token_env", "-", "the environment variable holding the token instead"),
    k("admin", "auth", "true", "false: the admin API takes requests without a token (loopback demos)"),
    k("ring", "compat", "\"nginx\"", "the hashing scheme (`scheme` is the same key): nginx, pingora-v1, pingora-v2, libmemcached, twemproxy or twemproxy:HASH, haproxy or haproxy:FUNCTION[+avalanche], envoy-ring-hash or envoy-ring-hash:OPTIONS (Envoy's and gRPC's ring_hash; envoy-ring-hash:grpc for gRPC's sizes), maglev or maglev:PRIME (Envoy's Maglev)"),
    k("ring", "layout", "\"compact\"", "how points are stored: wide (8 B), packed (6 B) or compact (about 3 B); routing is the same"),
    k("ring", "point_multiple", "160", "points per weight unit"),
    k("key", "source", "\"path_query\"", "the routing key: path_query (nginx's $request_uri), path, host_path or header"),
    k("key", "header", "-", "the header whose value is the key, with source = \"header\" (nginx's $http_NAME)"),
    k("key", "template", "-", "nginx's hash <template> instead of source: literal text and $request_uri, $uri, $args, $arg_NAME, $cookie_NAME, $http_NAME, $host, $remote_addr, $scheme, each nginx 1.22's bytes; an empty key is routed round robin"),
    k("key", "hash_policy_peer", "\"envoy\"", "whose reading of [[key.hash_policy]] applies: envoy, or grpc (header policies only, a field's values joined with commas, as gRPC's ring_hash reads them)"),
    k("[key.hash_policy]", "header", "-", "Envoy's hash policies instead of source (envoy-ring-hash and maglev rings): hash this field's values (each rewritten, sorted, chained with XXH64); each policy names one of header, cookie, query_parameter, source_ip"),
    k("[key.hash_policy]", "regex_rewrite", "-", "with header: { pattern = RE2, substitution = \"...\\\\1...\" } applied to each value first"),
    k("[key.hash_policy]", "pattern", "-", "regex_rewrite's RE2 pattern"),
    k("[key.hash_policy]", "substitution", "-", "regex_rewrite's replacement (\\\\1 for a group)"),
    k("[key.hash_policy]", "cookie", "-", "hash this cookie's value (the first so named, unquoted)"),
    k("[key.hash_policy]", "ttl_s", "-", "with cookie: when absent, generate it (Envoy's value: hex XXH64 of the connection's addresses) and send Set-Cookie with Max-Age (0: a session cookie)"),
    k("[key.hash_policy]", "path", "-", "with ttl_s: the generated cookie's Path"),
    k("[key.hash_policy]", "attributes", "[]", "with ttl_s: the generated cookie's attributes, [{ name, value }] (an empty value: the name alone)"),
    k("[key.hash_policy]", "query_parameter", "-", "hash this query parameter's first value, undecoded"),
    k("[key.hash_policy]", "source_ip", "false", "hash the client's address (as text, without port)"),
    k("[key.hash_policy]", "terminal", "false", "stop after this policy once a hash exists; policies combine as hash = rotl(hash, 1) xor next; no hash at all: round robin"),
    k("key.normalize", "sort_query", "false", "sort the query's parameters for the key (whole name=value chunks, bytewise; empty ones dropped): one server for every order of one query; the request is forwarded as sent"),
    k("key.normalize", "drop_query", "-", "parameter names the key leaves out (exact, undecoded; Cloudflare's query exclude); not with keep_query"),
    k("key.normalize", "keep_query", "-", "the only parameter names the key keeps ([]: none; Cloudflare's query include); not with drop_query"),
    k("key.normalize", "lowercase_host", "false", "lowercase the Host a host_path key or $http_host reads ($host is lowercase already)"),
    k("key", "balance", "-", "HAProxy's balance line instead of source: \"uri [path-only] [whole] [depth N] [len N]\" (the target as sent, cut as HAProxy cuts it), \"hdr(NAME) [use_domain_only]\", \"url_param NAME\", \"source\" (haproxy rings only), \"rdp-cookie(NAME)\" (the first Cookie line read as an RDP cookie) or \"hash req.cook(NAME)|req.hdr(NAME)|url_param(NAME)\"; a value not there is routed round robin"),
    k("[backends]", "address", "-", "the backend, IP:PORT (required)"),
    k("[backends]", "weight", "1", "its weight (0: drained, no points)"),
    k("[backends]", "labels", "[]", "labels label rules can require"),
    k("[backends]", "down", "false", "keep its points but route past it"),
    k("[backends]", "id", "-", "its HAProxy server id, with [ring] compat = \"haproxy\" (1 to 1048575; default: HAProxy's counter rule over the backends' order)"),
    k("[backends]", "connect_timeout_ms", "-", "its own connect timeout (default: server's)"),
    k("[backends]", "read_timeout_ms", "-", "its own read timeout (default: server's)"),
    k("[backends]", "write_timeout_ms", "-", "its own write timeout (default: server's)"),
    k("[backends]", "max_fails", "-", "its own max_fails (default: server's)"),
    k("[backends]", "fail_timeout_ms", "-", "its own fail_timeout_ms (default: server's)"),
    k("[backends]", "tls", "false", "reach it over TLS, as [upstream_tls] says"),
    k("[backends]", "sni", "-", "the name sent as SNI and verified in its certificate (required with tls unless upstream_tls.verify = false)"),
    k("[backends]", "h2c", "false", "speak HTTP/2 with prior knowledge in plaintext (gRPC backends; not with tls: use tls with upstream_tls.h2)"),
    k("[label_rules]", "host", "-", "match requests whose Host (port stripped, any case) is this"),
    k("[label_rules]", "header", "-", "match requests with this header, with value"),
    k("[label_rules]", "value", "-", "the header's exact value"),
    k("[label_rules]", "require", "[]", "the labels a backend needs to serve a matching request; the first matching rule applies"),
    k("migration", "ring", "-", "the new ring: { compat, layout, point_multiple } (the old one is [ring])"),
    k("migration", "global_bp", "0", "share of keys routed by the new ring, in basis points (0 to 10000)"),
    k("migration", "scopes", "{}", "per-scope overrides: { NAME = BP }"),
    k("migration", "scope", "-", "this router's scope (with [control]: control.scope instead)"),
    k("migration.key", "(as [key])", "-", "the new side's key when the migration changes the key: template, balance, source, header, [migration.key.normalize], [[migration.key.hash_policy]] as under [key]; the old side keeps [key], the side is chosen by the new key (see keys.md); absent: both sides take [key]"),
    k("migration", "previous_owner_header", "-", "a request header (e.g. x-ketama-previous-owner) carrying the old ring's choice, as configured, on requests the new ring sends to another backend, so a cache can fill from its peer; one from the client is always removed (absent: off)"),
    k("health", "enabled", "true", "active health checks"),
    k("health", "path", "\"/health\"", "the path checked with GET; 2xx or 3xx passes"),
    k("health", "interval_ms", "1000", "time between two rounds of checks"),
    k("health", "timeout_ms", "500", "a check's timeout"),
    k("health", "healthy_threshold", "1", "passes in a row that bring a backend back"),
    k("health", "unhealthy_threshold", "2", "failures in a row that take a backend out"),
    k("health", "grpc", "false", "check with gRPC's health protocol (grpc.health.v1.Health/Check; SERVING passes) instead of GET path; h2c and HTTP/2 TLS backends are asked in HTTP/2 either way"),
    k("health", "grpc_service", "\"\"", "the service the gRPC check asks about (empty: the server as a whole)"),
    k("cache_status", "header", "\"cache-status\"", "the response header that says whether the backend's cache answered: cache-status is read as RFC 9211's list (its last member: hit, fwd=stale, fwd=bypass, other fwd: miss); any other as a comma-separated list whose last value is matched against the lists below"),
    k("cache_status", "hit", "[\"HIT\", \"STALE\", \"UPDATING\"]", "values that are answers from the cache (any case)"),
    k("cache_status", "miss", "[\"MISS\", \"EXPIRED\", \"REVALIDATED\"]", "values where the cache went to the origin"),
    k("cache_status", "bypass", "[\"BYPASS\"]", "values where the cache did not take part"),
    k("balance", "factor", "-", "bounded loads: no backend above factor% of the average load (100 to 1000; absent: off)"),
    k("[discovery]", "srv", "-", "an SRV name: one backend per target and port"),
    k("[discovery]", "name", "-", "a host name: one backend per A/AAAA address, with port"),
    k("[discovery]", "port", "-", "the port of a name source's backends"),
    k("[discovery]", "weight", "-", "SRV: \"equal\" (default) or \"srv\"; a name: a number (default 1)"),
    k("[discovery]", "labels", "[]", "labels every backend of the source carries"),
    k("[discovery]", "resolvers", "[]", "DNS servers, IP:PORT (default: the system's)"),
    k("[discovery]", "min_interval_ms", "1000", "shortest time between two resolutions (the TTL is kept within the bounds)"),
    k("[discovery]", "max_interval_ms", "60000", "longest time between two resolutions"),
    k("[discovery]", "timeout_ms", "2000", "a query's timeout; a whole resolution gets three times it"),
    k("[discovery]", "max_remove_share", "0.5", "a change removing more of the source's weight is held until confirmed"),
    k("[discovery]", "confirm", "3", "resolutions in a row that confirm a held change"),
    k("[discovery]", "wait_for_discovery", "false", "with no backend at start, wait for DNS instead of refusing to start"),
    k("[discovery]", "tls", "false", "reach the source's backends over TLS"),
    k("[discovery]", "sni", "-", "the SNI sent and verified (default: the SRV target, or the name)"),
    k("[discovery]", "h2c", "false", "speak HTTP/2 with prior knowledge in plaintext to the source's backends"),
    k("upstream_tls", "ca_file", "-", "PEM CA certificates TLS backends must chain to (default: the system's trust store)"),
    k("upstream_tls", "verify", "true", "verify TLS backends' certificates and names (false: a warning)"),
    k("upstream_tls", "cert_file", "-", "a client certificate for mutual TLS to backends"),
    k("upstream_tls", "key_file", "-", "its key"),
    k("upstream_tls", "h2", "false", "offer HTTP/2 by ALPN to TLS backends"),
    k("control", "etcd", "-", "etcd endpoint URLs (restart to change)"),
    k("control", "prefix", "-", "the fleet's key prefix"),
    k("control", "scope", "-", "this router's scope (data center)"),
    k("control", "id", "-", "this router's id (default: host name and first listener)"),
    k("control", "cache_file", "-", "where the last applied config and rollout are kept, to start from without etcd"),
    k("control", "user_env", "-", "the variable holding the etcd user"),
    k("control", "password_env", "-", "the variable holding the etcd password"),
    k("control", "ca_file", "-", "the CA that signed etcd's certificate"),
    k("control", "cert_file", "-", "a client certificate for etcd"),
    k("control", "key_file", "-", "its key"),
    k("control", "timeout_ms", "2000", "an etcd request's timeout"),
    k("control", "lease_ttl_s", "10", "the registration lease's TTL, seconds"),
    k("control", "retry_min_ms", "100", "first backoff after an etcd error"),
    k("control", "retry_max_ms", "5000", "longest backoff"),
    k("control", "watch_idle_ms", "60000", "a silent watch is reopened after it"),
    k("control", "report_interval_ms", "5000", "how often this router writes its cache and answer counters by ring into its registration, for `ketama fleet plan` (100 to 3600000)"),
];

/// The sections in file order, as headings (`[server]`, `[[backends]]`).
fn heading(section: &str) -> String {
    match section.strip_prefix('[') {
        Some(array) => format!("[[{array}]"),
        None => format!("[{section}]"),
    }
}

/// The guide's table: one row per key.
pub fn markdown_table() -> String {
    let mut out = String::from("| section | key | default | what it does |\n|---|---|---|---|\n");
    for d in KEYS {
        let default = if d.default == "-" {
            "-".to_string()
        } else {
            format!("`{}`", d.default)
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {default} | {} |\n",
            heading(d.section),
            d.key,
            d.what.replace('|', "\\|")
        ));
    }
    out
}

/// Escapes text for roff.
fn roff(s: &str) -> String {
    let mut out = s.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with(['.', '\'']) {
        out.insert_str(0, "\\&");
    }
    out
}

/// The `ketama-router.toml(5)` man page, in roff (`version` names the
/// release in its footer).
pub fn man_page(version: &str) -> String {
    let mut out = format!(
        ".TH KETAMA\\-ROUTER.TOML 5 \"\" \"ketama {}\" \"File Formats\"\n.SH NAME\nketama\\-router.toml \\- the configuration of ketama\\-router\n.SH DESCRIPTION\nketama\\-router reads one TOML file (\\fB\\-\\-config FILE\\fR; the Debian package's is /etc/ketama/router.toml). \\fBketama\\-router \\-\\-check \\-\\-config FILE\\fR validates it offline, rings included. Every error names the file and the key. SIGHUP or POST /reload applies a changed file without dropping a request; the keys marked \\(lqrestart to change\\(rq apply only after a restart or graceful upgrade.\n",
        roff(version)
    );
    let mut section = "";
    for d in KEYS {
        if d.section != section {
            section = d.section;
            out.push_str(&format!(".SH {}\n", roff(&heading(section))));
        }
        let default = if d.default == "-" {
            String::new()
        } else {
            format!(" (default {})", roff(d.default))
        };
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR{default}\n{}\n",
            roff(d.key),
            roff(d.what)
        ));
    }
    out.push_str(".SH SEE ALSO\n\\fBketama\\-router\\fR(8), \\fBketama\\fR(1)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `pub NAME:` field of the TOML model is a documented key.
    #[test]
    fn every_model_field_is_listed() {
        let model = concat!(
            include_str!("model.rs"),
            include_str!("model_tls.rs"),
            include_str!("model_key.rs"),
            include_str!("model_log.rs"),
            include_str!("model_cache.rs")
        );
        let listed: std::collections::HashSet<&str> = KEYS.iter().map(|d| d.key).collect();
        let mut missing = Vec::new();
        for line in model.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub ") else {
                continue;
            };
            let Some((name, _)) = rest.split_once(':') else {
                continue;
            };
            let sections = [
                "server",
                "admin",
                "ring",
                "key",
                "normalize",
                "backends",
                "discovery",
                "label_rules",
                "migration",
                "health",
                "balance",
                "control",
                "tls",
                "upstream_tls",
                "certificates",
                "hash_policy",
                "access_log",
                "cache_status",
            ];
            if name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                && !sections.contains(&name)
                && !listed.contains(name)
            {
                missing.push(name.to_string());
            }
        }
        assert!(missing.is_empty(), "model fields not in KEYS: {missing:?}");
    }

    #[test]
    fn the_defaults_are_the_models() {
        let v = crate::parse("[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n[[backends]]\naddress = \"127.0.0.1:1\"\n", "t").unwrap();
        let s = &v.config.server;
        let h = &v.config.health;
        let find = |sec: &str, key: &str| {
            KEYS.iter()
                .find(|d| d.section == sec && d.key == key)
                .unwrap()
                .default
        };
        for (key, value) in [
            ("threads", s.threads.to_string()),
            ("retries", s.retries.to_string()),
            ("max_header_bytes", s.max_header_bytes.to_string()),
            ("body_buffer_bytes", s.body_buffer_bytes.to_string()),
            (
                "client_header_timeout_ms",
                s.client_header_timeout_ms.to_string(),
            ),
            ("keepalive_timeout_ms", s.keepalive_timeout_ms.to_string()),
            ("keepalive_requests", s.keepalive_requests.to_string()),
            ("keepalive_time_ms", s.keepalive_time_ms.to_string()),
            (
                "client_body_timeout_ms",
                s.client_body_timeout_ms.to_string(),
            ),
            ("send_timeout_ms", s.send_timeout_ms.to_string()),
            ("connect_timeout_ms", s.connect_timeout_ms.to_string()),
            ("read_timeout_ms", s.read_timeout_ms.to_string()),
            ("write_timeout_ms", s.write_timeout_ms.to_string()),
            ("max_fails", s.max_fails.to_string()),
            ("fail_timeout_ms", s.fail_timeout_ms.to_string()),
            ("grace_period_seconds", s.grace_period_seconds.to_string()),
            (
                "upstream_keepalive_pool_size",
                s.upstream_keepalive_pool_size.to_string(),
            ),
        ] {
            assert_eq!(find("server", key), value, "server.{key}");
        }
        assert_eq!(find("health", "interval_ms"), h.interval_ms.to_string());
        assert_eq!(find("health", "timeout_ms"), h.timeout_ms.to_string());
        assert_eq!(
            find("ring", "point_multiple"),
            v.config.ring.point_multiple.to_string()
        );
    }

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("a-b\\c"), "a\\-b\\ec");
        assert_eq!(roff(".x"), "\\&.x");
        assert!(man_page("0.1.0").contains(".SH [[backends]]\n"));
    }
}
