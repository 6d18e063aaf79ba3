//! The router's own request path allocates nothing once warm: reading
//! the request head (the engine's reader), taking the routing key (every
//! source, nginx templates of every variable, an empty key routed round
//! robin), matching a label rule, the routing decision (with a migration
//! and label requirements), walking failover past unhealthy backends, the
//! bounded-loads placement (which holds its slots), writing the head to
//! the backend (with `X-Forwarded-*`), reading the response head, writing
//! the client's (with the `x-ketama-*` fields), counting the request.
//! Counted by a global allocator that counts this thread's allocations
//! while requests are being served.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

use ketama_router::engine::testing::{
    request_head, response_head, Downstream, H1Request, H1Response, Head, Reader, Record,
    ResponseHead, Rules, Upstream,
};
use ketama_router::health::HealthRegistry;
use ketama_router::metrics::Metrics;
use ketama_router::policy::route::{choose, decide};
use ketama_router::state::{Files, RoutingState};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to `System`; the counters are
// thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

fn config(key: &str, extra: &str) -> String {
    let mut s = format!(
        "{extra}\n[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n\n[key]\n{key}\n\n[ring]\nlayout = \"compact\"\n\n[migration]\nring = {{ compat = \"pingora-v2\", layout = \"compact\", point_multiple = 40 }}\nglobal_bp = 5000\nscope = \"ams\"\n\n[[label_rules]]\nhost = \"eu.example.com\"\nrequire = [\"eu\"]\n\n[[label_rules]]\nheader = \"x-tier\"\nvalue = \"ssd\"\nrequire = [\"ssd\"]\n"
    );
    for i in 0..40 {
        let labels = match i % 3 {
            0 => "[\"eu\", \"ssd\"]",
            1 => "[\"eu\"]",
            _ => "[\"us\", \"ssd\"]",
        };
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"10.0.0.{i}:80\"\nweight = {}\nlabels = {labels}\n",
            1 + i % 4
        ));
    }
    s
}

#[test]
fn routing_a_request_allocates_nothing() {
    // The counter counts (a vector is one allocation).
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
    let (health, metrics) = (HealthRegistry::default(), Metrics::default());
    for (key, extra) in [
        ("source = \"path_query\"", ""),
        ("source = \"path\"", ""),
        ("source = \"host_path\"", ""),
        ("source = \"header\"\nheader = \"x-cache-key\"", ""),
        // Templates of every variable: written to the thread's buffer.
        (
            "template = \"$scheme://$host$uri?v=$arg_v&$args|$cookie_sid|$http_cookie|$http_x_cache_key|$remote_addr|$request_uri\"",
            "",
        ),
        // A header that is sometimes missing: the empty key, round robin.
        ("template = \"$http_x_tier\"", ""),
        // HAProxy's forms.
        ("balance = \"url_param v\"", ""),
        ("balance = \"hdr(Host) use_domain_only\"", ""),
        ("balance = \"hash req.cook(sid)\"", ""),
        ("balance = \"rdp-cookie(a)\"", ""),
        // Bounded loads, tight enough that requests spill.
        ("source = \"path_query\"", "[balance]\nfactor = 125\n"),
    ] {
        let v = ketama_config::parse(&config(key, extra), "alloc.toml").unwrap();
        let state = RoutingState::build_with(v, &health, &metrics, &[], None, Files::All).unwrap();
        // Some backends are out: the walk passes over them.
        for b in state.backends.iter().step_by(3) {
            b.health.record(false, 1, 1);
        }
        let requests: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                let host = ["eu.example.com", "www.example.com:8080", "other"][i % 3];
                let tier = if i % 2 == 0 { "X-Tier: ssd\r\n" } else { "" };
                format!(
                    "GET /obj/{i}?v={} HTTP/1.1\r\nHost: {host}\r\n{tier}X-Cache-Key: k{i}\r\nCookie: a=1; sid=s{i}\r\nCookie: b=2\r\nAccept: */*\r\n\r\n",
                    i % 7
                )
                .into_bytes()
            })
            .collect();
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nCache-Control: max-age=60\r\nX-Cache: HIT\r\n\r\n";
        let clients: Vec<std::net::IpAddr> = (0..8u8)
            .map(|i| std::net::IpAddr::from([10, 0, 0, i]))
            .collect();
        let rules = Rules::new(32 * 1024);
        let date = b"Sun, 06 Dec 2026 04:00:00 GMT";
        // What a connection keeps from one request to the next: its head,
        // the response head's field list, the output buffers; and the
        // records of requests in flight (holding their slots), in a vector
        // allocated beforehand.
        let mut head = Head::default();
        let mut resp = ResponseHead::new();
        let (mut up_out, mut down_out) = (Vec::with_capacity(4096), Vec::with_capacity(4096));
        let mut held: Vec<Record> = Vec::with_capacity(requests.len());
        let mut serve_all = |state: &RoutingState| {
            let mut written = 0usize;
            held.clear();
            for (i, raw) in requests.iter().enumerate() {
                let mut reader = Reader::new();
                assert!(
                    reader.advance(raw, &mut head, &rules).unwrap(),
                    "a whole head"
                );
                let req = H1Request {
                    head: &head,
                    buf: raw,
                    peer: Some(ketama_router::engine::testing::Ends {
                        client: std::net::SocketAddr::new(clients[i % clients.len()], 40000),
                        local: "10.9.9.9:80".parse().unwrap(),
                    }),
                    tls: false,
                };
                let d = decide(&req, state).unwrap();
                let (mut route, rule) = (d.route, d.rule);
                metrics.lookup(route.version());
                let c = choose(state, &mut route)
                    .unwrap()
                    .expect("a healthy eligible backend");
                let mut r = Record::default();
                r.route = Some(route);
                r.rule = rule;
                r.attempt_started(c.node, c.spills, c.slot);
                let up = Upstream {
                    chunked: false,
                    forwarded: Some((Some(clients[i % clients.len()]), false)),
                    hint: None,
                };
                request_head(&req, &up, &mut up_out);
                written += up_out.len();
                resp.restart();
                assert!(resp.parse(response).unwrap(), "a whole response head");
                let view = H1Response {
                    head: &resp,
                    buf: response,
                };
                let d = Downstream {
                    keep_alive: true,
                    chunked: false,
                    date,
                };
                response_head(
                    &view,
                    &d,
                    r.ketama_fields(state, c.node).iter(),
                    &mut down_out,
                );
                written += down_out.len();
                let b = &state.backends[c.node];
                b.metrics.count(200, Instant::now().elapsed().as_secs_f64());
                b.health.record_success();
                held.push(r);
            }
            written
        };
        // Once to warm up what grows once (a thread's key buffer, the
        // head's field list).
        serve_all(&state);
        let n = allocations(|| {
            std::hint::black_box(serve_all(&state));
        });
        assert_eq!(
            n,
            0,
            "{key} {extra}: {n} allocations for {} requests",
            requests.len()
        );
        // What was written is what a backend and a client get.
        assert!(
            String::from_utf8_lossy(&up_out).contains("x-forwarded-for: 10.0.0."),
            "{}",
            String::from_utf8_lossy(&up_out)
        );
        assert!(
            String::from_utf8_lossy(&down_out).contains("x-ketama-backend: 10.0.0."),
            "{}",
            String::from_utf8_lossy(&down_out)
        );
        if let Some(b) = &state.balance {
            let spills: u64 = state.backends.iter().map(|b| b.metrics.spills()).sum();
            assert!(spills > 0, "some requests spilled");
            assert_eq!(b.loads.total(), requests.len() as u64, "the slots are held");
        }
        drop(held);
    }
}
