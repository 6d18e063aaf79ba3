//! A kept-alive request through the router's own HTTP/1 engine allocates
//! nothing once the connection is warm: its head read into the thread's
//! spare buffer, the route, the pooled backend connection, the heads
//! written from prebuilt bytes, the response relayed, the request counted.
//! The engine runs in this process on a thread of its own whose
//! allocations a global allocator counts; the client and the origins run
//! on other threads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ketama_router::access_log::AccessLog;
use ketama_router::cell::{ConfigSource, Parts, RoutingCell};
use ketama_router::drain::Drain;
use ketama_router::engine::testing::{serve, ClientIo, Idle};
use ketama_router::engine::Engine;
use ketama_router::metrics::Metrics;
use ketama_router::origin::Origin;

struct Counting;

static ENGINE_ALLOCS: AtomicU64 = AtomicU64::new(0);

/// While set, the first few counted allocations record where they came
/// from, so a failure says what allocated.
static CAPTURE: AtomicBool = AtomicBool::new(false);
static CAPTURED: AtomicUsize = AtomicUsize::new(0);
static STACKS: Mutex<Vec<String>> = Mutex::new(Vec::new());

thread_local! {
    static ON_ENGINE: Cell<bool> = const { Cell::new(false) };
    /// Set while a stack is recorded: its own allocations are not counted.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if !ON_ENGINE.with(Cell::get) || RECORDING.with(Cell::get) {
        return;
    }
    ENGINE_ALLOCS.fetch_add(1, Relaxed);
    if CAPTURE.load(Relaxed) && CAPTURED.fetch_add(1, Relaxed) < 3 {
        RECORDING.with(|r| r.set(true));
        let stack = std::backtrace::Backtrace::force_capture().to_string();
        STACKS.lock().unwrap_or_else(|e| e.into_inner()).push(stack);
        RECORDING.with(|r| r.set(false));
    }
}

// SAFETY: forwards every call unchanged to `System`; the counters are
// thread-local cells and atomics, which do not allocate; recording a stack
// allocates, with `RECORDING` set so that those allocations are neither
// counted nor recorded (no recursion).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One response off a kept-alive connection: its status.
fn response(c: &mut TcpStream, buf: &mut Vec<u8>) -> u16 {
    buf.clear();
    let mut chunk = [0u8; 4096];
    loop {
        let n = c.read(&mut chunk).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if buf.len() >= end + 4 + len {
            return head[9..12].parse().unwrap();
        }
    }
}

#[test]
fn a_kept_alive_request_through_the_engine_allocates_nothing() {
    // One after the other: the counter is the process's.
    allocations("", |i| format!("/obj/{}?v={}", i % 97, i % 5));
    // A normalized key (the query sorted and filtered, the host
    // lowercased) is built in the thread's buffers.
    allocations(
        "[key]\nsource = \"host_path\"\n[key.normalize]\nsort_query = true\ndrop_query = [\"utm\"]\nlowercase_host = true\n",
        |i| format!("/obj/{}?v={}&utm=x&a={}&&b", i % 97, i % 5, i % 3),
    );
}

/// Kept-alive requests to `target(i)` through an engine configured with
/// `extra` allocate nothing once warm; a new connection's first does.
fn allocations(extra: &str, target: impl Fn(usize) -> String) {
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:1\"]\n[admin]\nlisten = \"127.0.0.1:2\"\nauth = false\n[health]\nenabled = false\n{extra}",
    );
    for o in &origins {
        text.push_str(&format!("[[backends]]\naddress = \"{}\"\n", o.addr()));
    }
    let v = ketama_config::parse(&text, "engine_alloc.toml").unwrap();
    let metrics = Arc::new(Metrics::default());
    let access_log = AccessLog::start().unwrap();
    let source = ConfigSource::Text {
        name: "engine_alloc.toml".into(),
        text,
    };
    let parts = Parts {
        health: Arc::default(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
    };
    let cell = RoutingCell::new(source, v, None, Default::default(), None, parts).unwrap();
    let engine = Arc::new(Engine {
        routing: cell.reader(),
        metrics: metrics.clone(),
        access_log,
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        ON_ENGINE.with(|c| c.set(true));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let drain = Arc::new(Drain::default());
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, peer) = l.accept().await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let (open, _) = metrics.connection_opened();
                let ends = ketama_router::engine::testing::Ends {
                    client: peer,
                    local: tcp.local_addr().unwrap(),
                };
                let client = Idle {
                    io: ClientIo::Plain(tcp),
                    peer: Some(ends),
                    since: Instant::now(),
                    engine: engine.clone(),
                    drain: drain.clone(),
                    open,
                };
                tokio::spawn(serve(client, Vec::new()));
            }
        });
    });

    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.set_nodelay(true).unwrap();
    let mut buf = Vec::with_capacity(8192);
    let mut run = |n: usize| {
        for i in 0..n {
            let req = format!(
                "GET {} HTTP/1.1\r\nHost: CDN.test\r\nUser-Agent: t\r\n\r\n",
                target(i)
            );
            c.write_all(req.as_bytes()).unwrap();
            assert_eq!(response(&mut c, &mut buf), 200);
        }
    };
    // Warm: every backend's pooled connection made, the buffers and the
    // request's future in place.
    run(300);
    let before = ENGINE_ALLOCS.load(Relaxed);
    CAPTURE.store(true, Relaxed);
    // At least 1,000 requests, over at least 3.5 s: what changes once a
    // second (the `Date` value) changes several times meanwhile.
    let until = Instant::now() + Duration::from_millis(3500);
    let mut requests = 0;
    while requests < 1000 || Instant::now() < until {
        run(100);
        requests += 100;
    }
    CAPTURE.store(false, Relaxed);
    let n = ENGINE_ALLOCS.load(Relaxed) - before;
    let stacks = STACKS.lock().unwrap().join("\n----\n");
    assert_eq!(
        n, 0,
        "{n} allocations for {requests} kept-alive requests over 3.5 s; the first ones came from:\n{stacks}"
    );
    // The counter counts on the engine's thread: a new connection's first
    // request allocates (its task, its request's future).
    let mut other = TcpStream::connect(addr).unwrap();
    other
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let before = ENGINE_ALLOCS.load(Relaxed);
    other
        .write_all(b"GET /x HTTP/1.1\r\nHost: cdn.test\r\n\r\n")
        .unwrap();
    assert_eq!(response(&mut other, &mut buf), 200);
    assert!(ENGINE_ALLOCS.load(Relaxed) > before);
}
