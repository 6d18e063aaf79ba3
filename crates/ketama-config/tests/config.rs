//! Config validation: every error names the file and the key.

use ketama_config::parse;

const BASE: &str = r#"
[admin]
listen = "127.0.0.1:9901"
token = "t"

[[backends]]
address = "127.0.0.1:9001"
"#;

fn err(text: &str) -> String {
    parse(text, "r.toml").unwrap_err().to_string()
}

#[test]
fn a_minimal_config_gets_defaults() {
    let v = parse(BASE, "r.toml").unwrap();
    assert_eq!(v.listen, vec!["127.0.0.1:8080".parse().unwrap()]);
    assert_eq!(
        v.ring,
        ketama::RingSettings {
            compat: ketama::Scheme::Nginx,
            layout: ketama::Layout::Compact,
            point_multiple: 160
        }
    );
    assert_eq!(v.token.as_deref(), Some("t"));
    assert_eq!(v.config.server.grace_period_seconds, 1);
    assert_eq!(v.balance, None, "bounded loads are off unless asked for");
    let on = parse(&format!("{BASE}\n[balance]\nfactor = 125\n"), "r.toml").unwrap();
    assert_eq!(on.balance.map(|f| f.percent()), Some(125));
}

#[test]
fn errors_name_file_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[server]\nlisten = [\"nope\"]\n",
            "r.toml: server.listen[0]: \"nope\" is not IP:PORT",
        ),
        (
            "[server]\nthreads = 0\n",
            "r.toml: server.threads: must be at least 1",
        ),
        (
            "[server]\ntrace_sample = 2.0\n",
            "r.toml: server.trace_sample",
        ),
        (
            "[ring]\ncompat = \"envoy\"\n",
            "r.toml: ring.compat: unknown compat \"envoy\"",
        ),
        (
            "[ring]\ncompat = \"haproxy:md5\"\n",
            "r.toml: ring.compat: unknown compat \"haproxy:md5\"",
        ),
        (
            "[key]\nbalance = \"uri deep 3\"\n",
            "r.toml: key.balance: uri only accepts parameters 'len', 'depth', 'path-only', and 'whole' (got 'deep')",
        ),
        (
            "[key]\nbalance = \"uri depth 0\"\n",
            "r.toml: key.balance: uri: 'depth' expects a positive integer",
        ),
        (
            "[key]\nbalance = \"hdr()\"\n",
            "r.toml: key.balance: \"hdr()\": write hdr(NAME)",
        ),
        (
            "[key]\nbalance = \"roundrobin\"\n",
            "r.toml: key.balance: \"roundrobin\": ketama-router takes HAProxy's",
        ),
        (
            "[key]\nsource = \"path\"\nbalance = \"uri\"\n",
            "r.toml: key.balance: give one of balance (HAProxy's form), template (nginx's) or source/header, not two",
        ),
        (
            "[ring]\nlayout = \"tiny\"\n",
            "r.toml: ring.layout: unknown layout \"tiny\"",
        ),
        (
            "[ring]\npoint_multiple = 0\n",
            "r.toml: ring.point_multiple",
        ),
        (
            "[balance]\nfactor = 99\n",
            "r.toml: balance.factor: balance factor 99 is out of range",
        ),
        (
            "[balance]\nfactor = 1001\n",
            "r.toml: balance.factor: balance factor 1001 is out of range",
        ),
        (
            "[balance]\nfactr = 125\n",
            "r.toml: line 9 (balance.factr): unknown field `factr`, expected `factor`",
        ),
        (
            "[key]\nsource = \"cookie\"\n",
            "r.toml: key.source: unknown source \"cookie\"",
        ),
        ("[key]\nsource = \"header\"\n", "r.toml: key.header"),
        (
            "[key]\nsource = \"path_query\"\ntemplate = \"$uri\"\n",
            "r.toml: key.template: give template or source/header, not both",
        ),
        (
            "[key]\ntemplate = \"$host$cookie\"\n",
            "r.toml: key.template: template \"$host$cookie\": $cookie is not a variable a routing key can read; use $request_uri",
        ),
        (
            "[key]\ntemplate = \"${host\"\n",
            "r.toml: key.template: template \"${host\": the ${ at byte 0 is not closed",
        ),
        (
            "[key]\ntemplate = \"$uri$1\"\n",
            "r.toml: key.template: template \"$uri$1\": $1 is a regex capture",
        ),
        (
            "[key]\nsource = \"header\"\nheader = \"x key\"\n",
            "r.toml: key.header: \"x key\" is not a header name",
        ),
        (
            "[[backends]]\naddress = \"127.0.0.1:9001\"\n",
            "r.toml: backends[1].address: 127.0.0.1:9001 repeats backends[0]",
        ),
        (
            "[[backends]]\naddress = \"[::1]:9002\"\n[[backends]]\naddress = \"[0:0:0:0:0:0:0:1]:9002\"\n",
            "r.toml: backends[2].address: [0:0:0:0:0:0:0:1]:9002 repeats backends[1] ([::1]:9002): the same socket address",
        ),
        (
            "[server]\nlisten = [\"127.0.0.1:9901\"]\n",
            "r.toml: admin.listen: 127.0.0.1:9901 is also server.listen[0]",
        ),
        (
            "[server]\nlisten = [\"0.0.0.0:9901\"]\n",
            "r.toml: admin.listen: 127.0.0.1:9901 is also server.listen[0] (0.0.0.0:9901)",
        ),
        (
            "[server]\nlisten = [\"127.0.0.1:80\", \"127.0.0.1:80\"]\n",
            "r.toml: server.listen[1]: 127.0.0.1:80 repeats server.listen[0]",
        ),
        (
            "[server]\nclient_header_timeout_ms = 0\n",
            "r.toml: server.client_header_timeout_ms: must be at least 1",
        ),
        (
            "[server]\nmax_header_bytes = 2000000\n",
            "r.toml: server.max_header_bytes: must be from 1024 to 1048576",
        ),
        (
            "[server]\nbody_buffer_bytes = 4096\n",
            "r.toml: server.body_buffer_bytes: must be from 16384 to 16777216",
        ),
        (
            "[server]\nstrip_request_headers = [\"x-fill\", \"Content-Length\"]\n",
            "r.toml: server.strip_request_headers[1]: frames the request or the connection",
        ),
        (
            "[server]\nstrip_request_headers = [\"x fill\"]\n",
            "r.toml: server.strip_request_headers[0]: is not a header name",
        ),
        (
            "[server]\nmax_connections = 0\n",
            "r.toml: server.max_connections: must be at least 1",
        ),
        (
            "[[backends]]\naddress = \"127.0.0.1:9009\"\nread_timeout_ms = 0\n",
            "r.toml: backends[1].read_timeout_ms: must be at least 1",
        ),
        (
            "[[backends]]\naddress = \"cache:80\"\n",
            "r.toml: backends[1].address: \"cache:80\" is not IP:PORT",
        ),
        (
            "[[label_rules]]\nhost = \"a\"\nrequire = [\"eu\"]\n",
            "r.toml: label_rules[0].require: no backend carries label \"eu\"",
        ),
        (
            "[[label_rules]]\nheader = \"x\"\nrequire = []\n",
            "r.toml: label_rules[0]: give either host",
        ),
        (
            "[migration]\nring = {}\nglobal_bp = 10001\n",
            "r.toml: migration.global_bp",
        ),
        (
            "[migration]\nring = {}\nscopes = { ams = 20000 }\n",
            "r.toml: migration.scopes.ams",
        ),
        (
            "[bogus]\nx = 1\n",
            "r.toml: line 8 ([bogus]): unknown field `bogus`",
        ),
        (
            "[server]\nlisten = 5\n",
            "r.toml: line 9 (server.listen): invalid type",
        ),
    ];
    for (extra, want) in cases {
        let e = err(&format!("{BASE}{extra}"));
        assert!(e.starts_with(want), "{extra:?}\n got: {e}\nwant: {want}");
    }
    let e = err("[admin]\nlisten = \"10.0.0.1:9901\"\ntoken = \"t\"\n[[backends]]\naddress = \"127.0.0.1:1\"\n");
    assert!(
        e.starts_with("r.toml: admin.listen: the admin API listens on loopback only"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9901\"\n[[backends]]\naddress = \"127.0.0.1:1\"\n");
    assert!(e.starts_with("r.toml: admin: no token"), "{e}");
    let e = err("[admin]\nlisten = \"127.0.0.1:9901\"\ntoken_env = \"KETAMA_TEST_UNSET_VAR\"\n[[backends]]\naddress = \"127.0.0.1:1\"\n");
    assert!(
        e.starts_with("r.toml: admin.token_env: environment variable KETAMA_TEST_UNSET_VAR"),
        "{e}"
    );
    let e = err("[admin]\nlisten = \"127.0.0.1:9901\"\ntoken = \"t\"\n");
    assert!(e.contains("backends"), "{e}");
    // Auth may be turned off (the demo does, on loopback).
    let v = parse("[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n[[backends]]\naddress = \"127.0.0.1:1\"\n", "r.toml").unwrap();
    assert_eq!(v.token, None);
}

#[test]
fn the_committed_example_config_is_valid() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ketama-router/examples/router.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("token_env = \"KETAMA_ADMIN_TOKEN\"", "token = \"x\"");
    let v = parse(&text, "router.toml").unwrap();
    assert_eq!(v.config.backends.len(), 4);
    assert!(v.new_ring.is_some());
}
