//! The router's own request path allocates nothing: taking the routing key
//! (every source), matching a label rule, the routing decision (with a
//! migration and label requirements), walking failover past unhealthy
//! backends, the bounded-loads placement (which holds its slots), the
//! prebuilt header values, counting the request. Counted by a
//! global allocator that counts this thread's allocations while a request
//! is being routed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

use ketama_router::health::HealthRegistry;
use ketama_router::metrics::Metrics;
use ketama_router::proxy::{
    add_forwarded_headers, add_response_headers, choose, decide, PingoraRequest,
};
use ketama_router::state::{Files, RoutingState};
use pingora::http::{RequestHeader, ResponseHeader};

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
        // Bounded loads, tight enough that requests spill.
        ("source = \"path_query\"", "[balance]\nfactor = 125\n"),
    ] {
        let v = ketama_config::parse(&config(key, extra), "alloc.toml").unwrap();
        let state = RoutingState::build_with(v, &health, &metrics, &[], None, Files::All).unwrap();
        // Some backends are out: the walk passes over them.
        for b in state.backends.iter().step_by(3) {
            b.health.record(false, 1, 1);
        }
        let requests: Vec<RequestHeader> = (0..200)
            .map(|i| {
                let mut r =
                    RequestHeader::build("GET", format!("/obj/{i}?v={}", i % 7).as_bytes(), None)
                        .unwrap();
                let host = ["eu.example.com", "www.example.com:8080", "other"][i % 3];
                r.insert_header("host", host).unwrap();
                if i % 2 == 0 {
                    r.insert_header("x-tier", "ssd").unwrap();
                }
                r.insert_header("x-cache-key", format!("k{i}")).unwrap();
                r
            })
            .collect();
        // Slots held as a router holds them while requests are in flight
        // (in a vector allocated beforehand).
        let mut held = Vec::with_capacity(requests.len());
        let mut route_all = |state: &RoutingState| {
            let mut chosen = 0usize;
            held.clear();
            for req in &requests {
                let (mut route, _) = decide(&PingoraRequest { req, sent: None }, state).unwrap();
                metrics.lookup(route.version());
                let c = choose(state, &mut route)
                    .unwrap()
                    .expect("a healthy eligible backend");
                chosen += c.spills as usize;
                let b = &state.backends[c.node];
                held.push(c.slot);
                let header = b.header.clone();
                chosen += header.len();
                b.metrics.count(200, Instant::now().elapsed().as_secs_f64());
                b.health.record_success();
            }
            chosen
        };
        // Once to warm up what grows once (a thread's key buffer).
        route_all(&state);
        let n = allocations(|| {
            std::hint::black_box(route_all(&state));
        });
        assert_eq!(
            n,
            0,
            "{key} {extra}: {n} allocations for {} requests",
            requests.len()
        );

        // The header filters, on heads built beforehand. Pingora's
        // `insert_header` allocates for a name outside the standard set
        // (it copies it into a `HeaderName` and its case map), whatever
        // the value; so the filters are compared with the same inserts of
        // static values: ketama's own part (forwarded-for values of known
        // clients, prebuilt backend values) must add nothing.
        let clients: Vec<std::net::IpAddr> = (0..8u8)
            .map(|i| std::net::IpAddr::from([10, 0, 0, i]))
            .collect();
        let heads = || -> Vec<(RequestHeader, ResponseHeader)> {
            requests
                .iter()
                .map(|r| (r.clone(), ResponseHeader::build(200, Some(8)).unwrap()))
                .collect()
        };
        let version = ketama::Version::Only;
        // Warmed once: each client's value is built, and each backend's
        // value, cloned for the first time, becomes shared (`bytes` does
        // that on a first clone).
        for ip in &clients {
            add_forwarded_headers(&mut requests[0].clone(), Some(*ip), false).unwrap();
        }
        for b in 0..state.backends.len() {
            let mut resp = ResponseHeader::build(200, None).unwrap();
            add_response_headers(&mut resp, &state, Some(b), version, 0).unwrap();
        }
        let mut ours = heads();
        let n = allocations(|| {
            for (i, (up, resp)) in ours.iter_mut().enumerate() {
                add_forwarded_headers(up, Some(clients[i % clients.len()]), false).unwrap();
                let b = i % state.backends.len();
                add_response_headers(resp, &state, Some(b), version, (i % 2) as u32).unwrap();
            }
        });
        let mut statics = heads();
        let floor = allocations(|| {
            let v = http::HeaderValue::from_static;
            for (i, (up, resp)) in statics.iter_mut().enumerate() {
                up.insert_header("x-forwarded-for", v("10.0.0.1")).unwrap();
                up.insert_header("x-forwarded-proto", v("http")).unwrap();
                resp.insert_header("x-ketama-backend", v("127.0.0.1:1"))
                    .unwrap();
                resp.insert_header("x-ketama-ring", v("only")).unwrap();
                if i % 2 == 1 {
                    resp.insert_header("x-ketama-spill", v("1")).unwrap();
                }
            }
        });
        assert_eq!(
            n, floor,
            "{key} {extra}: the header filters allocate {n} times, the same inserts of static values {floor}"
        );
        assert_eq!(
            ours[3].0.headers["x-forwarded-for"],
            clients[3].to_string().as_str()
        );

        if let Some(b) = &state.balance {
            let spills: u64 = state.backends.iter().map(|b| b.metrics.spills()).sum();
            assert!(spills > 0, "some requests spilled");
            assert_eq!(b.loads.total(), requests.len() as u64);
        }
    }
}
