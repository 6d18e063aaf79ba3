//! One request path for every protocol: the same request over HTTP/1.1,
//! h2c, HTTP/1.1 over TLS and HTTP/2 over TLS (curl each time) gets the
//! same status and the same `x-ketama-*` fields, and its backend is
//! handed the same request, in every way a request can fail: no healthy
//! backend for its label, every backend down, a backend failing before
//! its response head, after it, a backend answering an upload early, and
//! a client whose body stalls. (`X-Forwarded-Proto` says `https` over TLS:
//! compared within the plain pair and the TLS pair, left out across.)

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::scripted::{Head, Scripted};
use common::tls::{tls_section, Ca};
use common::*;

/// A router with h2c and a TLS listener over `backends` (and `extra`).
struct Fixture {
    router: RouterProc,
    tls: std::net::SocketAddr,
    ca: String,
    _dir: tempfile::TempDir,
}

fn fixture(backends: &str, extra: &str) -> Fixture {
    let certs = tempfile::tempdir().unwrap();
    let ca = Ca::new(certs.path(), "ca");
    let cert = ca.issue("a", &["a.test"], 30);
    let tls = any_port();
    let (router, dir, _) = router_from(|proxy, admin, _| {
        format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\nh2c = true\nmax_fails = 0\nclient_body_timeout_ms = 700\nstrip_request_headers = [\"x-strip\"]\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n{}\n{extra}\n{backends}",
            tls_section(tls, &[&cert], "")
        )
    });
    let tls = router.listener("tls.listen[0]");
    std::mem::forget(certs);
    Fixture {
        router,
        tls,
        ca: ca.cert.display().to_string(),
        _dir: dir,
    }
}

/// What a client saw: the status and the `x-ketama-*` fields.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: String,
    ketama: Vec<String>,
}

const PROTOCOLS: [&str; 4] = ["http/1.1", "h2c", "https/1.1", "h2"];

/// A request body.
#[derive(Clone, Copy)]
enum Body<'a> {
    None,
    /// Sent whole, with its length.
    Bytes(&'a [u8]),
    /// These bytes, then nothing for 2 s (past the router's body
    /// timeout), with no length.
    Stall(&'a [u8]),
}

/// A request: its path, fields and body (POST with a body).
struct Ask<'a> {
    path: &'a str,
    fields: &'a [(&'a str, &'a str)],
    body: Body<'a>,
}

/// Sends `a` over `protocol`: curl for HTTP/1.1 (plain and TLS), the `h2`
/// crate's client for HTTP/2 (curl 7.88 prints no head for a stream reset
/// right after its HEADERS, which an HTTP/2 client does receive).
fn ask(f: &Fixture, protocol: &str, a: &Ask<'_>) -> Seen {
    match protocol {
        "h2c" | "h2" => h2_ask(f, protocol == "h2", a),
        _ => curl_ask(f, protocol == "https/1.1", a),
    }
}

fn seen(status: String, fields: impl Iterator<Item = (String, String)>) -> Seen {
    let mut ketama: Vec<String> = fields
        .filter(|(n, _)| n.to_ascii_lowercase().starts_with("x-ketama-"))
        .map(|(n, v)| format!("{}: {}", n.to_ascii_lowercase(), v.trim()))
        .collect();
    ketama.sort();
    Seen { status, ketama }
}

fn curl_ask(f: &Fixture, tls: bool, a: &Ask<'_>) -> Seen {
    let resolve = format!("a.test:{}:127.0.0.1", f.tls.port());
    let mut cmd = Command::new("curl");
    // One Host for every listener.
    cmd.args([
        "-s",
        "--max-time",
        "10",
        "-o",
        "/dev/null",
        "-D",
        "-",
        "--http1.1",
    ])
    .args(["-H", "host: a.test"]);
    let url = if tls {
        cmd.args(["--cacert", &f.ca, "--resolve", &resolve]);
        format!("https://a.test:{}{}", f.tls.port(), a.path)
    } else {
        format!("http://{}{}", f.router.proxy, a.path)
    };
    for (n, v) in a.fields {
        cmd.args(["-H", &format!("{n}: {v}")]);
    }
    let dir = tempfile::tempdir().unwrap();
    match a.body {
        Body::None => {}
        Body::Bytes(b) => {
            let file = dir.path().join("body");
            std::fs::write(&file, b).unwrap();
            cmd.args(["--data-binary", &format!("@{}", file.display())]);
        }
        Body::Stall(_) => {
            cmd.args(["-T", "-", "-X", "POST"]);
        }
    }
    cmd.arg(url).stdout(Stdio::piped()).stderr(Stdio::null());
    let out = match a.body {
        Body::Stall(first) => {
            let mut child = cmd.stdin(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(first).unwrap();
            stdin.flush().unwrap();
            let hold = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(2));
                drop(stdin);
            });
            let out = child.wait_with_output().unwrap();
            hold.join().unwrap();
            out
        }
        _ => cmd.stdin(Stdio::null()).output().unwrap(),
    };
    let all = String::from_utf8_lossy(&out.stdout);
    // The final head (curl writes a `100 Continue` before it).
    let head = all
        .split("\r\n\r\n")
        .filter(|h| !h.trim().is_empty())
        .last()
        .unwrap_or("");
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("none")
        .to_string();
    let fields = head.lines().skip(1).filter_map(|l| {
        let (n, v) = l.split_once(':')?;
        Some((n.to_string(), v.to_string()))
    });
    seen(status, fields)
}

fn h2_ask(f: &Fixture, tls: bool, a: &Ask<'_>) -> Seen {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let addr = if tls { f.tls } else { f.router.proxy };
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (send, conn) = if tls {
            let config = common::tls::client_config(f.ca.as_ref(), &["h2"], None);
            let name = rustls_pki_types::ServerName::try_from("a.test").unwrap();
            let io = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
                .connect(name, tcp)
                .await
                .unwrap();
            let (send, conn) = h2::client::handshake(io).await.unwrap();
            (send, tokio::spawn(async move { drop(conn.await) }))
        } else {
            let (send, conn) = h2::client::handshake(tcp).await.unwrap();
            (send, tokio::spawn(async move { drop(conn.await) }))
        };
        let scheme = if tls { "https" } else { "http" };
        let mut req = http::Request::builder()
            .method(if matches!(a.body, Body::None) {
                "GET"
            } else {
                "POST"
            })
            .uri(format!("{scheme}://a.test{}", a.path))
            .header("user-agent", "curl/7.88.1")
            .header("accept", "*/*");
        for (n, v) in a.fields {
            req = req.header(*n, *v);
        }
        if let Body::Bytes(b) = a.body {
            // What curl's --data-binary sends with it.
            req = req
                .header("content-length", b.len())
                .header("content-type", "application/x-www-form-urlencoded");
        }
        let mut send = send.ready().await.unwrap();
        let end = matches!(a.body, Body::None);
        let (response, mut stream) = send.send_request(req.body(()).unwrap(), end).unwrap();
        let sending = async {
            match a.body {
                Body::None => {}
                Body::Bytes(b) => {
                    // As the window allows; an early answer may end it.
                    let mut rest = b;
                    while !rest.is_empty() {
                        stream.reserve_capacity(rest.len());
                        let n = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                            Some(Ok(n)) => n.min(rest.len()),
                            _ => break,
                        };
                        let last = n == rest.len();
                        if stream
                            .send_data(bytes::Bytes::copy_from_slice(&rest[..n]), last)
                            .is_err()
                        {
                            break;
                        }
                        rest = &rest[n..];
                    }
                }
                Body::Stall(first) => {
                    let _ = stream.send_data(bytes::Bytes::copy_from_slice(first), false);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let _ = stream.send_data(bytes::Bytes::new(), true);
                }
            }
            std::future::pending::<()>().await
        };
        let answer = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                r = response => r,
                () = sending => unreachable!(),
            }
        })
        .await;
        let result = match answer {
            Ok(Ok(resp)) => {
                let fields = resp
                    .headers()
                    .iter()
                    .map(|(n, v)| {
                        (
                            n.to_string(),
                            String::from_utf8_lossy(v.as_bytes()).into_owned(),
                        )
                    })
                    .collect::<Vec<_>>();
                let status = resp.status().as_u16().to_string();
                // Read the body to its end or its break.
                let mut body = resp.into_body();
                while let Some(Ok(_)) = body.data().await {}
                seen(status, fields.into_iter())
            }
            _ => seen("none".into(), std::iter::empty()),
        };
        conn.abort();
        result
    })
}

/// A head's fields as a sorted list, less those that differ by protocol
/// on purpose when `across` (`x-forwarded-proto`) and those curl writes
/// differently over HTTP/1.1 and HTTP/2 (`user-agent` is the same; curl
/// sends `expect` only over HTTP/1.1, and the router never forwards it).
fn fields(h: &Head, across: bool) -> Vec<(String, String)> {
    let mut v: Vec<_> = h
        .fields
        .iter()
        .filter(|(n, _)| !(across && n == "x-forwarded-proto"))
        .cloned()
        .collect();
    v.sort();
    v
}

/// Every protocol's answer and backend heads for one case; asserts they
/// agree and returns the HTTP/1.1 answer and heads.
fn same_everywhere(f: &Fixture, origin: Option<&Scripted>, a: &Ask<'_>) -> (Seen, Vec<Head>) {
    let path = a.path;
    let mut runs = Vec::new();
    for p in PROTOCOLS {
        let seen = ask(f, p, a);
        // The backend's side of a failed exchange may still be closing.
        std::thread::sleep(Duration::from_millis(50));
        let heads = origin.map(Scripted::take).unwrap_or_default();
        runs.push((p, seen, heads));
    }
    let (_, first, first_heads) = &runs[0];
    for (p, seen, heads) in &runs[1..] {
        assert_eq!(seen, first, "{path}: {p} against HTTP/1.1");
        assert_eq!(
            heads.len(),
            first_heads.len(),
            "{path}: {p}: {heads:?} against {first_heads:?}"
        );
        let across = p.starts_with('h') && *p != "h2c";
        for (h, g) in heads.iter().zip(first_heads) {
            assert_eq!(h.line, g.line, "{path}: {p}");
            assert_eq!(fields(h, across), fields(g, across), "{path}: {p}");
        }
    }
    // Within the TLS pair, X-Forwarded-Proto too.
    let (_, _, s1) = &runs[2];
    let (_, _, s2) = &runs[3];
    for (a, b) in s1.iter().zip(s2) {
        assert_eq!(fields(a, false), fields(b, false), "{path}: over TLS");
    }
    let (_, seen, heads) = runs.swap_remove(0);
    (seen, heads)
}

#[test]
fn every_failure_is_answered_alike_over_every_protocol() {
    let origin = Scripted::start();
    let (_hold, refused) = refusing_addr();
    let backends = format!(
        "[[backends]]\naddress = \"{}\"\nlabels = [\"silver\"]\n\n[[backends]]\naddress = \"{refused}\"\nlabels = [\"gold\"]\ndown = true\n",
        origin.addr
    );
    let rules = "[[label_rules]]\nheader = \"x-tier\"\nvalue = \"gold\"\nrequire = [\"gold\"]\n\n[[label_rules]]\nheader = \"x-tier\"\nvalue = \"silver\"\nrequire = [\"silver\"]\n";
    let f = fixture(&backends, rules);
    // With a field strip_request_headers names and one nginx ignores:
    // neither reaches the backend, whatever the protocol.
    let silver: &[(&str, &str)] = &[
        ("x-tier", "silver"),
        ("x-custom", "1"),
        ("cookie", "a=1"),
        ("x-strip", "1"),
        ("x_under", "1"),
    ];
    let get = |path| Ask {
        path,
        fields: silver,
        body: Body::None,
    };
    let has_backend = |s: &Seen| s.ketama.iter().any(|k| k.starts_with("x-ketama-backend: "));

    // A request that is served, the baseline.
    let (ok, heads) = same_everywhere(&f, Some(&origin), &get("/ok/a?b=1"));
    assert_eq!(ok.status, "200");
    assert!(has_backend(&ok), "{ok:?}");
    assert_eq!(heads.len(), 1);
    let names: Vec<&str> = heads[0].fields.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"x-custom") && !names.contains(&"x-strip") && !names.contains(&"x_under"),
        "{names:?}"
    );

    // No healthy backend for the label: 502, nothing sent anywhere.
    let gold = Ask {
        path: "/ok/b",
        fields: &[("x-tier", "gold")],
        body: Body::None,
    };
    let (no, heads) = same_everywhere(&f, Some(&origin), &gold);
    assert_eq!(no.status, "502", "{no:?}");
    assert!(heads.is_empty());

    // A backend failing before its response head: 502 naming it.
    let (before, heads) = same_everywhere(&f, Some(&origin), &get("/reset/c"));
    assert_eq!(before.status, "502", "{before:?}");
    assert!(has_backend(&before), "{before:?}");
    assert!(!heads.is_empty());

    // After its head: the client has the head, then the body breaks.
    let (after, heads) = same_everywhere(&f, Some(&origin), &get("/cut/d"));
    assert_eq!(after.status, "200", "{after:?}");
    assert!(has_backend(&after), "{after:?}");
    assert_eq!(heads.len(), 1);

    // An early answer to an upload (256 KiB, more than is read whole).
    let big = vec![b'x'; 256 * 1024];
    let upload = Ask {
        path: "/early/e",
        fields: silver,
        body: Body::Bytes(&big),
    };
    let (early, heads) = same_everywhere(&f, Some(&origin), &upload);
    assert_eq!(early.status, "413", "{early:?}");
    assert_eq!(heads.len(), 1);

    // A client whose body stalls: 408 after client_body_timeout_ms; the
    // backend had the head (the body streams, it is not read whole).
    let stall = Ask {
        path: "/wait/f",
        fields: silver,
        body: Body::Stall(b"abc"),
    };
    let (slow, heads) = same_everywhere(&f, Some(&origin), &stall);
    assert_eq!(slow.status, "408", "{slow:?}");
    assert_eq!(heads.len(), 1);
}

#[test]
fn every_backend_down_is_answered_alike_over_every_protocol() {
    let (_hold, refused) = refusing_addr();
    let (_hold2, refused2) = refusing_addr();
    let backends = format!(
        "[[backends]]\naddress = \"{refused}\"\n\n[[backends]]\naddress = \"{refused2}\"\n"
    );
    let f = fixture(&backends, "");
    let a = Ask {
        path: "/x",
        fields: &[],
        body: Body::None,
    };
    let (down, _) = same_everywhere(&f, None, &a);
    assert_eq!(down.status, "502", "{down:?}");
    assert!(
        down.ketama
            .iter()
            .any(|k| k.starts_with("x-ketama-backend: ")),
        "{down:?}"
    );
}
