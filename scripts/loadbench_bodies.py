"""The `bodies` and `conns` sections of scripts/loadbench.py, called with
the loadbench module, whose helpers they use.

bodies: cache-sized objects. The origins serve files of 16 KiB, 256 KiB
and 1 MiB (sendfile); wrk -t1 -c8 fetches them through ketama-router,
stock Pingora, nginx as shipped (its default proxy buffers, which spill a
large response to a temp file) and nginx tuned (buffers sized to the
object, no temp file), one worker each, interleaved rounds; and 1 MiB
uploads (POST) through each. GB/s of bodies, the proxy process's CPU
seconds per GB, its RSS after the runs.

conns: 10,000 concurrent keep-alive connections, opened by 4 wrk
processes started 2 s apart, each connection paced by a Lua `delay()` to
one request every 2 s (about 5,000 requests/s in all): p99 latency of
the busiest wrk, and RSS per connection held (RSS with them open minus
RSS before, over 10,000, with each connection idle after one request)
of router, stock Pingora and nginx with `worker_connections 20000`.
"""

import os
import re
import resource
import subprocess
import time

SIZES = [("16 KiB", 16 << 10), ("256 KiB", 256 << 10), ("1 MiB", 1 << 20)]
UPLOAD = 1 << 20


def files(lb):
    """The objects the origins serve under /b/SIZE (loadbench's origin
    config roots /b/ at W/www)."""
    os.makedirs(os.path.join(lb.W, "www", "b"), exist_ok=True)
    # nginx's workers run as nobody when started by root: readable by all.
    for d in (lb.W, os.path.join(lb.W, "www"), os.path.join(lb.W, "www", "b")):
        os.chmod(d, 0o755)
    for _, n in SIZES:
        path = os.path.join(lb.W, "www", "b", str(n))
        with open(path, "wb") as f:
            f.write(os.urandom(n))
        os.chmod(path, 0o644)


def nginx(lb, port, tuned, conns=4096):
    """One nginx process (no master, so its CPU and RSS are the worker's)
    proxying with `hash $request_uri consistent`."""
    conf = os.path.join(lb.W, f"bodies-{port}.conf")
    ups = "\n".join(f"    server {o} max_fails=0;" for o in lb.ORIGINS)
    buffers = ("proxy_buffer_size 256k; proxy_buffers 8 256k; proxy_busy_buffers_size 512k; "
               "proxy_max_temp_file_size 0; client_body_buffer_size 2m;" if tuned else "")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; master_process off; daemon off; pid {lb.W}/bodies-{port}.pid; error_log {lb.W}/bodies-{port}.err crit;
worker_rlimit_nofile {min(conns * 2 + 100, resource.getrlimit(resource.RLIMIT_NOFILE)[1])};
events {{ worker_connections {conns}; }}
http {{ access_log off; keepalive_requests 1000000; client_max_body_size 2m;
  client_body_temp_path {lb.W}/body-{port}; proxy_temp_path {lb.W}/proxy-{port};
  upstream backend {{ hash $request_uri consistent; keepalive 128;
{ups}
  }}
  server {{ listen 127.0.0.1:{port} backlog=16384;
    location / {{ proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; {buffers} }} }}
}}
""")
    p = lb.spawn(["nginx", "-p", lb.W, "-c", conf])
    lb.wait_http(port)
    return p


def get_lua(lb, size):
    path = os.path.join(lb.W, f"get-{size}.lua")
    with open(path, "w") as f:
        f.write(f"""local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/b/{size}?n=" .. (n % 100000))
end
""")
    return path


def post_lua(lb):
    path = os.path.join(lb.W, "post.lua")
    with open(path, "w") as f:
        f.write(f"""local n = 0
local body = string.rep("x", {UPLOAD})
request = function()
  n = n + 1
  return wrk.format("POST", "/up/" .. (n % 100000), nil, body)
end
""")
    return path


def wrk_rate(lb, port, script, conns=8):
    out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{lb.DUR}s", "-s", script, f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        raise SystemExit(f"loadbench: port {port} answered {bad.group(1)} non-2xx responses:\n{out}")
    return rps


def bodies(lb):
    lb.log("bodies")
    files(lb)
    base = 18600
    procs = [
        ("ketama-router (defaults)", base, lb.router(base, 1)[0]),
        ("stock Pingora (jemalloc)", base + 1, lb.stock(base + 1, 1, binary="stock-jemalloc")),
        ("nginx as shipped (default proxy buffers)", base + 2, nginx(lb, base + 2, False)),
        ("nginx tuned (256 KiB buffers, no temp file)", base + 3, nginx(lb, base + 3, True)),
    ]
    # An A/B of a change: the router and stock Pingora built before it, in the same rounds.
    baseline = os.environ.get("BASELINE_BIN")
    if baseline:
        procs += [
            ("ketama-router (baseline)", base + 4, lb.router(base + 4, 1, binary=os.path.join(baseline, "router"))[0]),
            ("stock Pingora (baseline)", base + 5,
             lb.stock(base + 5, 1, binary=os.path.join(baseline, "stock-jemalloc"))),
        ]
    tests = [(label, n, get_lua(lb, n)) for label, n in SIZES] + [("1 MiB upload", UPLOAD, post_lua(lb))]
    res = {t[0]: {name: [] for name, _, _ in procs} for t in tests}
    for r in range(lb.ROUNDS):
        for label, n, script in tests:
            order = procs[r % len(procs):] + procs[:r % len(procs)]
            for name, port, p in order:
                c0 = lb.cpu_seconds(p.pid)
                rps = wrk_rate(lb, port, script)
                gb = rps * n * lb.DUR / 1e9
                res[label][name].append((gb / lb.DUR, (lb.cpu_seconds(p.pid) - c0) / gb))
        lb.log(f"  round {r + 1}/{lb.ROUNDS}")
    rss = {name: lb.rss_mb(p.pid) for name, _, p in procs}
    print(f"### Cache-sized objects, one worker each (wrk -t1 -c8, {lb.DUR} s x {lb.ROUNDS} interleaved rounds)\n")
    print("| object | proxy | GB/s (median) | spread | router / this (median, min-max) | CPU s per GB (median) |")
    print("|---|---|---:|---:|---:|---:|")
    ref = procs[0][0]
    summary = {}
    for label, _, _ in tests:
        for name, _, _ in procs:
            runs = res[label][name]
            rates = [x[0] for x in runs]
            ratios = [a[0] / b[0] for a, b in zip(res[label][ref], runs)]
            rt = "-" if name == ref else f"{lb.med(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            print(f"| {label} | {name} | {lb.med(rates):.2f} | {lb.spread(rates, '{:.2f}')} | {rt} | {lb.med([x[1] for x in runs]):.3f} |")
            summary[(label, name)] = (lb.med(rates), lb.med(ratios))
    print()
    print("| proxy | RSS after the runs MB |")
    print("|---|---:|")
    for name, mb in rss.items():
        print(f"| {name} | {mb:.1f} |")
    print()
    lb.SUMMARY["bodies"] = {"sizes": [label for label, _, _ in tests], "procs": [name for name, _, _ in procs],
                            "figures": summary}
    for _, _, p in procs:
        lb.stop(p)


def raise_file_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, max(n, hard)))
    except (ValueError, OSError):
        raise SystemExit(f"loadbench: conns needs {n} open files and the limit is {soft}/{hard}: raise it (ulimit -n, or run as root)")


DELAY_LUA = """local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/assets/" .. (n % 100000) .. "/object.jpg")
end
delay = function() return 2000 end
done = function(summary, latency, requests)
  io.write(string.format("p50_us %d p99_us %d requests %d errors %d\\n", latency:percentile(50), latency:percentile(99),
    summary.requests, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout))
end
"""


def conns(lb):
    total, procs_n, step = 10_000, 4, 2
    raise_file_limit(total + 5000)
    lb.log("conns")
    script = os.path.join(lb.W, "delay.lua")
    with open(script, "w") as f:
        f.write(DELAY_LUA)
    base = 18700
    limits = f"max_connections = {2 * total}"
    targets = [
        ("ketama-router (defaults, max_connections 20000)", base, lambda: lb.router(base, 1, server_extra=limits)[0]),
        ("stock Pingora (jemalloc)", base + 1, lambda: lb.stock(base + 1, 1, binary="stock-jemalloc")),
        ("nginx (worker_connections 20000)", base + 2, lambda: nginx(lb, base + 2, False, conns=2 * total)),
    ]
    dur = procs_n * step + max(lb.DUR, 10)
    rows = []
    for name, port, start in targets:
        p = start()
        time.sleep(1)
        idle = idle_kib(lb, p.pid, port, total)
        before = lb.rss_mb(p.pid)
        wrks = []
        for i in range(procs_n):
            wrks.append(subprocess.Popen(
                ["wrk", "-t1", f"-c{total // procs_n}", f"-d{dur - i * step}s", "--timeout", "10s", "-s", script,
                 f"http://127.0.0.1:{port}/"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            time.sleep(step)
        # Every connection opened: wait until the proxy holds them all.
        t0 = time.monotonic()
        held = 0
        while time.monotonic() - t0 < 20:
            held = open_sockets(p.pid)
            if held >= total:
                break
            time.sleep(0.2)
        time.sleep(2)
        rss = lb.rss_mb(p.pid)
        outs = [w.communicate()[0] for w in wrks]
        figures = []
        for out in outs:
            m = re.search(r"p50_us (\d+) p99_us (\d+) requests (\d+) errors (\d+)", out)
            if not m:
                raise SystemExit(f"loadbench: wrk against {name} printed {out}")
            figures.append(tuple(int(x) for x in m.groups()))
        p99 = max(f[1] for f in figures) / 1000
        p50 = sorted(f[0] for f in figures)[len(figures) // 2] / 1000
        reqs, errors = sum(f[2] for f in figures), sum(f[3] for f in figures)
        rows.append((name, held, p50, p99, reqs, errors, before, rss, idle))
        lb.stop(p)
    print(f"### {total} concurrent keep-alive connections ({procs_n} wrk processes {step} s apart, one request per connection every 2 s), one worker each\n")
    print("| proxy | sockets held | p50 ms | p99 ms (worst wrk) | requests | errors | RSS before MB | RSS under load MB | KiB per idle connection |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.2f} | {r[4]} | {r[5]} | {r[6]:.1f} | {r[7]:.1f} | {r[8]:.1f} |")
    nginx_row = rows[-1]
    print(f"\nRouter / nginx: p99 {rows[0][3] / nginx_row[3]:.2f}, RSS per connection {rows[0][8] / nginx_row[8]:.2f}.\n")
    lb.SUMMARY["conns"] = rows


def idle_kib(lb, pid, port, n):
    """RSS per idle keep-alive connection: n connections each make one
    request, read its answer and stay open; (RSS then - RSS before) / n."""
    import socket
    before = lb.rss_mb(pid)
    socks = []
    for i in range(n):
        # One request at a time: what stays is what an idle connection
        # holds, not the peak of 10,000 requests in flight.
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /idle/%d HTTP/1.1\r\nHost: bench.test\r\n\r\n" % i)
        socks.append(s)
        got = b""
        while b"\r\n\r\n" not in got or not got.endswith(b"ok\n"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit(f"loadbench: port {port} closed an idle connection: {got!r}")
            got += chunk
    time.sleep(3)
    held = lb.rss_mb(pid)
    for s in socks:
        s.close()
    # Let the proxy see the closes before the next phase.
    deadline = time.monotonic() + 20
    while open_sockets(pid) > 1000 and time.monotonic() < deadline:
        time.sleep(0.2)
    return (held - before) * 1e6 / n / 1024


def open_sockets(pid):
    """Established TCP sockets of a process: its socket fds (listeners and
    upstream connections included, which a few hundred at most)."""
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n

