"""The `tls` section of scripts/loadbench.py: ketama-router's TLS
listener against nginx 1.22 and a stock Pingora proxy with its `rustls`
listener, one worker each, TLS 1.3 on every server, the same ECDSA P-256
certificate, interleaved rounds:

- keep-alive HTTPS/1.1 (wrk);
- full handshakes (`openssl s_time -new`: a new session every connection,
  so no server resumes one whatever its settings), and resumed ones
  (`s_time -reuse`, resumption on everywhere);
- HTTP/2 over TLS (h2load, 32 connections x 10 streams).

Each figure with the CPU each server process used per request or per
connection. Called with the loadbench module, whose helpers it uses.
"""

import os
import re
import subprocess


def certificate(lb):
    cert, key = os.path.join(lb.W, "bench.pem"), os.path.join(lb.W, "bench.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=bench.test",
                    "-addext", "subjectAltName=DNS:bench.test"],
                   check=True, capture_output=True)
    return cert, key


def nginx_tls(lb, port, cert, key, resumption):
    conf = os.path.join(lb.W, f"tls-{port}.conf")
    ups = "\n".join(f"    server {o} max_fails=0;" for o in lb.ORIGINS)
    session = ("ssl_session_cache shared:S:10m; ssl_session_tickets on;" if resumption
               else "ssl_session_cache off; ssl_session_tickets off;")
    with open(conf, "w") as f:
        # One process (no master), so its CPU is the worker's.
        f.write(f"""worker_processes 1; master_process off; daemon off; pid {lb.W}/tls-{port}.pid; error_log {lb.W}/tls-{port}.err crit;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000;
  upstream backend {{ hash $request_uri consistent; keepalive 128;
{ups}
  }}
  server {{ listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {cert}; ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3; {session}
    location / {{ proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }} }}
}}
""")
    p = lb.spawn(["nginx", "-p", lb.W, "-c", conf])
    wait_tls(port)
    return p


def wait_tls(port):
    import socket
    import time
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"loadbench: nothing listens on {port}")


def router_tls(lb, port, cert, key, resumption, headers=True, env=None, server_extra=""):
    plain = lb.free_port()
    extra = (f'[tls]\nlisten = ["127.0.0.1:{port}"]\nsession_resumption = {str(resumption).lower()}\n'
             f'[[tls.certificates]]\ncert_file = "{cert}"\nkey_file = "{key}"\n')
    if not headers:
        server_extra += "\nresponse_headers = false\nforwarded_headers = false"
    p, _, _ = lb.router(plain, 1, env=env, extra=extra, server_extra=server_extra)
    wait_tls(port)
    return p


def stock_tls(lb, port, cert, key):
    args = [os.path.join(lb.BIN, "stock-jemalloc"), "--listen", f"127.0.0.1:{port}", "--threads", "1",
            "--no-steal", "--keepalive", "128", "--tls", cert, key] + lb.ORIGINS
    p = lb.spawn(args)
    wait_tls(port)
    return p


def wrk_https(lb, port):
    out = subprocess.run(["wrk", "-t1", f"-c{lb.CONNS}", f"-d{lb.DUR}s", "-s", lb.LUA, f"https://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def s_time(lb, port, reuse):
    out = subprocess.run(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-reuse" if reuse else "-new",
                          "-time", str(lb.DUR), "-www", "/assets/1/object.jpg"],
                         capture_output=True, text=True).stdout
    m = re.search(r"(\d+) connections in ([\d.]+)s", out)
    if not m:
        raise SystemExit(f"loadbench: s_time against {port} printed {out!r}")
    return int(m.group(1)) / float(m.group(2))


def h2load(lb, port):
    out = subprocess.run(["h2load", "-c32", "-m10", "-t1", "-D", str(lb.DUR), f"https://127.0.0.1:{port}/assets/1/object.jpg"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out).group(1))
    bad = re.search(r"status codes: (\d+) 2xx", out)
    if not bad or int(bad.group(1)) == 0:
        raise SystemExit(f"loadbench: h2load against {port}: {out}")
    return rps


def tls(lb):
    lb.log("tls")
    cert, key = certificate(lb)
    base = 18500
    # Resumption off on nginx and the router for full handshakes; stock
    # Pingora keeps rustls' default (its listener has no switch), which
    # s_time -new never uses anyway.
    servers = [
        ("nginx 1.22 (1 worker)", base, nginx_tls(lb, base, cert, key, False)),
        ("stock Pingora, rustls listener", base + 1, stock_tls(lb, base + 1, cert, key)),
        ("ketama-router (defaults)", base + 2, router_tls(lb, base + 2, cert, key, False)),
        ("nginx 1.22, resumption on", base + 3, nginx_tls(lb, base + 3, cert, key, True)),
        ("ketama-router, resumption on", base + 4, router_tls(lb, base + 4, cert, key, True)),
        # Stock Pingora adds no header: the router without its own four
        # (x-ketama-backend, x-ketama-ring, X-Forwarded-For/-Proto) is the
        # like-for-like row.
        ("ketama-router, no added headers", base + 5, router_tls(lb, base + 5, cert, key, False, headers=False)),
    ]
    tests = [
        ("keep-alive HTTPS/1.1 (wrk -t1 -c32), requests/s", lambda p: wrk_https(lb, p), [0, 1, 5, 2]),
        ("full handshakes + 1 request (s_time -new), connections/s", lambda p: s_time(lb, p, False), [0, 1, 5, 2]),
        ("resumed handshakes + 1 request (s_time -reuse), connections/s", lambda p: s_time(lb, p, True), [3, 1, 4]),
        ("HTTP/2 over TLS (h2load -c32 -m10), requests/s", lambda p: h2load(lb, p), [0, 1, 5, 2]),
    ]
    res = {t[0]: {i: [] for i in t[2]} for t in tests}
    for r in range(lb.ROUNDS):
        for name, run, which in tests:
            order = which[r % len(which):] + which[:r % len(which)]
            for i in order:
                _, port, proc = servers[i]
                c0 = lb.cpu_seconds(proc.pid)
                rate = run(port)
                cpu = (lb.cpu_seconds(proc.pid) - c0) * 1e6 / (rate * lb.DUR)
                res[name][i].append((rate, cpu))
        lb.log(f"  round {r + 1}/{lb.ROUNDS}")
    print(f"### TLS 1.3, one worker each, ECDSA P-256 ({lb.DUR} s x {lb.ROUNDS} interleaved rounds)\n")
    for name, _, which in tests:
        print(f"**{name}**\n")
        print("| server | rate (median) | spread (min-max) | router / this (median, min-max) | server CPU us each (median) |")
        print("|---|---:|---:|---:|---:|")
        ref = which[-1]
        for i in which:
            runs = res[name][i]
            rates = [x[0] for x in runs]
            ratios = [a[0] / b[0] for a, b in zip(res[name][ref], runs)]
            rt = "-" if i == ref else f"{lb.med(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            print(f"| {servers[i][0]} | {lb.med(rates):.0f} | {lb.spread(rates)} | {rt} | {lb.med([x[1] for x in runs]):.1f} |")
        print()
        if 5 in which:
            like = [a[0] / b[0] for a, b in zip(res[name][5], res[name][1])]
            print(f"Like for like (ketama-router without its added headers / stock Pingora): "
                  f"{lb.med(like):.3f} ({min(like):.3f}-{max(like):.3f}).\n")
    for _, _, p in servers:
        lb.stop(p)
