"""The `cost` section's HTTP/2 rows (scripts/loadbench_cost.py calls
them): ketama-router's engine against nginx 1.22 (`listen ... http2`),
one worker each, the same four origins and `hash $request_uri
consistent` on nginx, h2c with prior knowledge and HTTP/2 over TLS 1.3.

Per request, over `h2load -c8 -m10 -t1` runs (small responses, URIs
spread over 1,000 paths) against each server in interleaved rounds: CPU
microseconds and system calls from `perf stat -p PID` (CPU from
/proc/PID/stat where perf is missing). Then RSS per idle HTTP/2
connection: 2,000 connections, each made one request on one stream,
read its answer and stayed open.
"""

import os
import re
import socket
import ssl
import statistics
import subprocess
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def literal(name, value):
    """An HPACK literal field without indexing, new name (lengths < 127)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_block(scheme, path):
    return (literal(b":method", b"GET") + literal(b":scheme", scheme) +
            literal(b":authority", b"bench.test") + literal(b":path", path))


def open_idle(port, i, tls_ctx):
    """A connection that made one request on stream 1, read its answer to
    the stream's end, and stays open."""
    s = socket.create_connection(("127.0.0.1", port))
    if tls_ctx:
        s = tls_ctx.wrap_socket(s, server_hostname="bench.test")
    scheme = b"https" if tls_ctx else b"http"
    s.sendall(PREFACE + frame(0x4, 0, 0) + frame(0x1, 0x5, 1, request_block(scheme, b"/idle/%d" % i)))
    buf = b""
    deadline = time.time() + 10
    while time.time() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit(f"loadbench: port {port} closed an idle HTTP/2 connection")
        buf += chunk
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            buf = buf[9 + n:]
            if kind == 0x4 and not flags & 1:
                s.sendall(frame(0x4, 1, 0))
            if stream == 1 and kind in (0x0, 0x1) and flags & 1:
                return s
            if stream == 1 and kind == 0x3:
                raise SystemExit(f"loadbench: port {port} reset an idle HTTP/2 request")
    raise SystemExit(f"loadbench: no answer on an HTTP/2 connection to {port}")


def nginx_h2(lb, h2c_port, tls_port, cert, key):
    conf = os.path.join(lb.W, f"h2-{h2c_port}.conf")
    ups = "\n".join(f"    server {o} max_fails=0;" for o in lb.ORIGINS)
    location = 'location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }'
    with open(conf, "w") as f:
        # One process (no master), so its CPU is the worker's.
        f.write(f"""worker_processes 1; master_process off; daemon off; pid {lb.W}/h2-{h2c_port}.pid; error_log {lb.W}/h2-{h2c_port}.err crit;
worker_rlimit_nofile 16384;
events {{ worker_connections 12000; }}
http {{ access_log off; keepalive_requests 1000000; http2_max_requests 1000000;
  upstream backend {{ hash $request_uri consistent; keepalive 128;
{ups}
  }}
  server {{ listen 127.0.0.1:{h2c_port} http2; {location} }}
  server {{ listen 127.0.0.1:{tls_port} ssl http2;
    ssl_certificate {cert}; ssl_certificate_key {key}; ssl_protocols TLSv1.3;
    {location} }}
}}
""")
    p = lb.spawn(["nginx", "-p", lb.W, "-c", conf])
    wait_port(h2c_port)
    wait_port(tls_port)
    return p


def router_h2(lb, h2c_port, tls_port, cert, key, binary="router"):
    extra = (f'[tls]\nlisten = ["127.0.0.1:{tls_port}"]\nmin_version = "1.3"\n'
             f'[[tls.certificates]]\ncert_file = "{cert}"\nkey_file = "{key}"\n')
    # Streams per connection as nginx's here (keepalive_requests 1000000):
    # h2load opens its connections once (a baseline too: one that closed
    # its connections after 1,000 streams answered a fraction of them).
    server = "h2c = true\nmax_connections = 12000\nh2_max_concurrent_streams = 128\nkeepalive_requests = 1000000"
    p, _, _ = lb.router(h2c_port, 1, binary=binary, extra=extra, server_extra=server)
    wait_port(tls_port)
    return p


def wait_port(port):
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"loadbench: nothing listens on {port}")


def uri_file(lb, scheme, port):
    path = os.path.join(lb.W, f"h2-uris-{scheme}-{port}.txt")
    with open(path, "w") as f:
        for i in range(1000):
            f.write(f"{scheme}://127.0.0.1:{port}/assets/{i % 37}/object-{i}.jpg?v={i % 7}\n")
    return path


def run_h2load(cmd, port, pid, use_perf):
    """Runs the h2load command `cmd` against `port`, the process `pid`
    counted by perf when use_perf: (requests that succeeded, h2load's
    output, {perf event: count})."""
    if use_perf:
        r = subprocess.run(["perf", "stat", "-x", ",", "-e", "task-clock,raw_syscalls:sys_enter", "-p", str(pid), "--"] + cmd,
                           capture_output=True, text=True, check=True)
        out, stat = r.stdout, r.stderr
    else:
        out, stat = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout, ""
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    codes = re.search(r"status codes: (\d+) 2xx", out)
    if not ok or not codes or int(codes.group(1)) == 0:
        raise SystemExit(f"loadbench: h2load against {port}: {out}")
    counts = {}
    for line in stat.splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[0].replace(".", "", 1).isdigit():
            counts[parts[2]] = float(parts[0])
    return int(ok.group(1)), out, counts


def counted_h2load(lb, cost, port, pid, use_perf, tls):
    """One h2load run with the server's process counted: (requests/s, CPU
    us, syscalls), each per request."""
    scheme = "https" if tls else "http"
    cmd = ["h2load", "-c8", "-m10", "-t1", "-D", str(lb.DUR), "-i", uri_file(lb, scheme, port)]
    u0, s0 = cost.proc_cpu(pid)
    reqs, out, counts = run_h2load(cmd, port, pid, use_perf)
    u1, s1 = cost.proc_cpu(pid)
    rps = float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out).group(1))
    cpu = counts["task-clock"] * 1e3 / reqs if "task-clock" in counts else (u1 - u0 + s1 - s0) * 1e6 / reqs
    calls = counts["raw_syscalls:sys_enter"] / reqs if "raw_syscalls:sys_enter" in counts else None
    return rps, cpu, calls


def h2_costs(lb, cost, use_perf, summary):
    import loadbench_tls
    cert, key = loadbench_tls.certificate(lb)
    base = 18840
    servers = [("ketama-router", base, base + 1, router_h2(lb, base, base + 1, cert, key))]
    baseline = os.environ.get("BASELINE_BIN")
    if baseline:
        servers.append(("ketama-router (baseline)", base + 4, base + 5,
                        router_h2(lb, base + 4, base + 5, cert, key,
                                  binary=os.path.join(os.path.abspath(baseline), "router"))))
    servers.append(("nginx", base + 2, base + 3, nginx_h2(lb, base + 2, base + 3, cert, key)))
    res = {(name, tls): [] for name, _, _, _ in servers for tls in (False, True)}
    for r in range(lb.ROUNDS):
        for tls in (False, True):
            for name, h2c, tport, p in servers[r % len(servers):] + servers[:r % len(servers)]:
                res[(name, tls)].append(counted_h2load(lb, cost, tport if tls else h2c, p.pid, use_perf, tls))
        lb.log(f"  h2 round {r + 1}/{lb.ROUNDS}")
    ctx = ssl.create_default_context(cafile=cert)
    ctx.set_alpn_protocols(["h2"])
    idle = {}
    for name, h2c, tport, p in servers:
        for tls in (False, True):
            port = tport if tls else h2c
            idle[(name, tls)] = cost.held_kib(lb, p.pid, lambda i: open_idle(port, i, ctx if tls else None), 2000)
    med = statistics.median
    print(f"### HTTP/2 (h2load -c8 -m10 -t1, {lb.DUR} s runs, 1,000 paths, {lb.ROUNDS} interleaved rounds, medians; one worker each)\n")
    print("| server | protocol | requests/s | CPU us / request (min-max) | system calls | CPU / nginx's (min-max) | RSS per idle HTTP/2 connection at 2,000, KiB | / nginx's |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    out = {}
    for tls in (False, True):
        ref = res[("nginx", tls)]
        for name, _, _, _ in servers:
            runs = res[(name, tls)]
            cpu = [x[1] for x in runs]
            ratio = [a[1] / b[1] for a, b in zip(runs, ref)]
            calls = [x[2] for x in runs if x[2] is not None]
            i = idle[(name, tls)]
            proto = "h2 over TLS 1.3" if tls else "h2c"
            print(f"| {name} | {proto} | {med([x[0] for x in runs]):.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
                  f"{cost.fmt(med(calls) if calls else None)} | {med(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) | "
                  f"{i:.2f} | {i / idle[('nginx', tls)]:.2f} |")
            out[f"{name} {proto}"] = {"cpu_us": med(cpu), "cpu_vs_nginx": med(ratio), "idle_kib": i}
    print()
    summary["h2"] = out
    for _, _, _, p in servers:
        lb.stop(p)
