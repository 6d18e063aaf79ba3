#!/usr/bin/env python3
"""The load benchmark behind scripts/loadbench.sh (which builds the binaries
and calls this): ketama-router against stock Pingora (a plain ProxyHttp with
LoadBalancer<KetamaHashing>, given every fair setting) and nginx, over
loopback origins served by one nginx worker. Prints markdown tables.

Arguments: BIN_DIR SECONDS ROUNDS SECTIONS (comma-separated of throughput,
alloc, balance, scale, flood, access_log, tls, bodies, conns, cost, keys, h2,
grpc, h2bodies). The
figures every section leaves in SUMMARY end in one summary table, and the
bodies section's in a chart (docs/loadbench-bodies.svg and .png).
"""

import atexit
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN, DUR, ROUNDS, SECTIONS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
W = tempfile.mkdtemp(prefix="loadbench.")
PROCS = []
ORIGINS = [f"127.0.0.1:{p}" for p in (19001, 19002, 19003, 19004)]
WIDE_PORT = 19100  # the origin port every address of 127/8 answers on
CONNS = int(os.environ.get("CONNS", "32"))
SUMMARY = {}  # section -> its headline figures, for the table at the end
CHART_DIR = os.environ.get("CHART_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))


def cleanup():
    # SIGTERM first: an nginx master killed outright leaves its workers.
    for p in PROCS:
        try:
            p.terminate()
        except OSError:
            pass
    deadline = time.monotonic() + 5
    for p in PROCS:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            pass
    for p in PROCS:
        try:
            p.kill()
        except OSError:
            pass
    for p in PROCS:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    shutil.rmtree(W, ignore_errors=True)


atexit.register(cleanup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def spawn(args, env=None):
    e = dict(os.environ, RUST_LOG="error")
    e.update(env or {})
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e)
    PROCS.append(p)
    return p


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def wait_http(port, host="127.0.0.1", timeout=120.0, path="/"):
    """Polls until the port answers an HTTP request; returns the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=2) as r:
                r.read()
                return time.monotonic() - t0
        except Exception:
            time.sleep(0.01)
    raise SystemExit(f"loadbench: port {port} did not answer within {timeout}s")


def rss_mb(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- the programs under test -------------------------------------------------

def nginx_origins():
    conf = os.path.join(W, "origin.conf")
    # /b/ serves the bodies section's files, /up/ takes its uploads, /wait/
    # reads a whole body before it answers (the cost section's stalled
    # uploads: nginx buffers the body before it proxies).
    servers = "\n".join(f"server {{ listen {o}; location / {{ return 200 \"ok\\n\"; }} location /b/ {{ root {W}/www; }} "
                        f"location /up/ {{ client_max_body_size 2m; return 200 \"ok\\n\"; }} "
                        f"location /wait/ {{ client_max_body_size 2m; proxy_pass http://127.0.3.7:{WIDE_PORT}; }} }}" for o in ORIGINS)
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; daemon off; pid {W}/origin.pid; error_log {W}/origin.err crit;
worker_rlimit_nofile 16384;
events {{ worker_connections 16384; }}
http {{ access_log off; keepalive_requests 1000000; sendfile on; tcp_nopush on;
client_body_temp_path {W}/origin-body;
{servers}
server {{ listen {WIDE_PORT}; location / {{ return 200 "ok\\n"; }} }}
}}
""")
    spawn(["nginx", "-p", W, "-c", conf])
    for o in ORIGINS:
        wait_http(int(o.split(":")[1]))
    wait_http(WIDE_PORT, host="127.0.3.7")


def nginx_proxy(workers, port):
    conf = os.path.join(W, f"proxy-{port}.conf")
    ups = "\n".join(f"    server {o} max_fails=0;" for o in ORIGINS)
    with open(conf, "w") as f:
        f.write(f"""worker_processes {workers}; daemon off; pid {W}/proxy-{port}.pid; error_log {W}/proxy-{port}.err crit;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000;
  upstream backend {{ hash $request_uri consistent; keepalive 128;
{ups}
  }}
  server {{ listen 127.0.0.1:{port};
    location / {{ proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }} }}
}}
""")
    p = spawn(["nginx", "-p", W, "-c", conf])
    wait_http(port)
    return p


def router_config(port, admin, threads, backends=None, server_extra="", health=True, extra=""):
    lines = [
        "[server]",
        f'listen = ["127.0.0.1:{port}"]',
        f"threads = {threads}",
        server_extra,
        "[admin]",
        f'listen = "127.0.0.1:{admin}"',
        "auth = false",
        "[ring]",
        'layout = "compact"',
        "[health]",
        'path = "/"' if health else "enabled = false",
    ]
    lines.append(extra)
    for b in backends or [(o, 1) for o in ORIGINS]:
        lines += ["[[backends]]", f'address = "{b[0]}"', f"weight = {b[1]}"]
    return "\n".join(lines) + "\n"


def router(port, threads, binary="router", env=None, **kw):
    admin = free_port()
    conf = os.path.join(W, f"router-{port}.toml")
    with open(conf, "w") as f:
        f.write(router_config(port, admin, threads, **kw))
    p = spawn([os.path.join(BIN, binary), "--config", conf], env=env)
    wait_http(port)
    return p, admin, conf


def stock(port, threads, binary="stock-system", steal=False, keepalive=128, backends_file=None, headers=False):
    args = [os.path.join(BIN, binary), "--listen", f"127.0.0.1:{port}", "--threads", str(threads)]
    if headers:
        args.append("--headers")
    if not steal:
        args.append("--no-steal")
    if keepalive is not None:
        args += ["--keepalive", str(keepalive)]
    if backends_file:
        args += ["--backends-file", backends_file]
    else:
        args += ORIGINS
    p = spawn(args)
    wait_http(port)
    return p


# --- wrk ---------------------------------------------------------------------

LUA = os.path.join(W, "uri.lua")
with open(LUA, "w") as f:
    f.write("""local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/assets/" .. (n % 100000) .. "/object.jpg?v=" .. (n % 7))
end
""")


def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)", v)
    x = float(m.group(1))
    return {"us": x / 1000, "ms": x, "s": x * 1000}[m.group(2)]


def wrk(port, threads, dur=None):
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{CONNS}", f"-d{dur or DUR}s", "--latency", "-s", LUA, f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        log(f"loadbench: port {port} answered {bad.group(1)} non-2xx responses")
    return rps, p50, p99


def med(v):
    return statistics.median(v)


def spread(v, fmt="{:.0f}"):
    return f"{fmt.format(min(v))}-{fmt.format(max(v))}"


def cpu_seconds(pid):
    """User plus system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interleaved(specs, threads, pids=None):
    """specs: [(name, port)]; each round runs every proxy once, rotating the
    order. Returns {name: [(rps, p50, p99, cpu_us_per_request), ...]}; the
    last is the proxy's own CPU per request when `pids` gives its process
    (None otherwise): less noisy than requests/s on a shared machine."""
    res = {name: [] for name, _ in specs}
    for r in range(ROUNDS):
        order = specs[r % len(specs):] + specs[:r % len(specs)]
        for name, port in order:
            pid = (pids or {}).get(name)
            c0 = cpu_seconds(pid) if pid else None
            rps, p50, p99 = wrk(port, threads)
            cpu = (cpu_seconds(pid) - c0) * 1e6 / (rps * DUR) if pid else None
            res[name].append((rps, p50, p99, cpu))
        log(f"  round {r + 1}/{ROUNDS}")
    return res


def table(res, ref, other=None):
    """A row per proxy: medians and spread; the router-to-this ratio per
    round (median, min-max) against `ref` rows."""
    cpu = any(r[3] is not None for runs in res.values() for r in runs)
    extra = " CPU us/request (median, min-max) |" if cpu else ""
    print(f"| proxy | requests/s (median) | spread (min-max) | p50 ms | p99 ms | {ref} / this (median, min-max) |{extra}")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|" if cpu else ""))
    for name, runs in res.items():
        rps = [r[0] for r in runs]
        ratios = [a[0] / b[0] for a, b in zip(res[ref], runs)]
        rt = "-" if name == ref else f"{med(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        c = ""
        if cpu:
            us = [r[3] for r in runs if r[3] is not None]
            c = f" {med(us):.1f} ({min(us):.1f}-{max(us):.1f}) |" if us else " - |"
        print(f"| {name} | {med(rps):.0f} | {spread(rps)} | {med([r[1] for r in runs]):.3f} | {med([r[2] for r in runs]):.3f} | {rt} |{c}")
    print()


# --- sections ----------------------------------------------------------------

def throughput():
    for workers in (1, 2):
        log(f"throughput, {workers} worker(s)")
        base = 18100 + 10 * workers
        ps = [nginx_proxy(workers, base),
              stock(base + 1, workers),
              stock(base + 2, workers, binary="stock-jemalloc"),
              stock(base + 3, workers, steal=True, keepalive=None),
              stock(base + 5, workers, binary="stock-jemalloc", headers=True),
              router(base + 4, workers)[0]]
        specs = [
            (f"nginx ({workers} worker{'s' if workers > 1 else ''}, hash $request_uri consistent)", base),
            ("stock Pingora, router's runtime settings, system allocator", base + 1),
            ("stock Pingora, router's runtime settings, jemalloc", base + 2),
            ("stock Pingora, Pingora's defaults (work stealing), system allocator", base + 3),
            ("stock Pingora, jemalloc, adding the router's four headers (--headers)", base + 5),
            ("ketama-router (defaults)", base + 4),
        ]
        time.sleep(1)
        # nginx's CPU is its workers', not its master's: not counted here.
        res = interleaved(specs, workers, {name: p.pid for (name, _), p in list(zip(specs, ps))[1:]})
        if workers == 1:
            SUMMARY["throughput"] = {name: med([r[0] for r in runs]) for name, runs in res.items()}
            SUMMARY["throughput_ratio"] = {
                name: med([a[0] / b[0] for a, b in zip(res["ketama-router (defaults)"], runs)]) for name, runs in res.items()}
        print(f"### {workers} worker{'s' if workers > 1 else ''} each (wrk -t{workers} -c{CONNS}, {DUR} s x {ROUNDS} interleaved rounds)\n")
        table(res, "ketama-router (defaults)")
        for p in ps:
            stop(p)


def alloc():
    log("allocators")
    ps, specs = [], []
    for i, (name, binary) in enumerate([("jemalloc (default)", "router"), ("system (glibc)", "router-system"), ("mimalloc", "router-mimalloc")]):
        port = 18200 + i
        ps.append(router(port, 1, binary=binary)[0])
        specs.append((f"ketama-router, {name}", port))
    # The router's own cost with the headers and forwarding it adds off.
    ps.append(router(18210, 1, server_extra="response_headers = false\nforwarded_headers = false")[0])
    specs.append(("ketama-router, jemalloc, response_headers and forwarded_headers off", 18210))
    time.sleep(1)
    res = interleaved(specs, 1)
    print(f"### ketama-router by global allocator and option (one worker, {DUR} s x {ROUNDS} rounds)\n")
    table(res, "ketama-router, jemalloc (default)")
    for p in ps:
        stop(p)


def balance():
    """Bounded loads' cost: the router with [balance] factor = 125 against
    the same router without, at one and two workers."""
    for workers in (1, 2):
        log(f"balance, {workers} worker(s)")
        base = 18300 + 10 * workers
        ps = [router(base, workers)[0], router(base + 1, workers, extra="[balance]\nfactor = 125")[0]]
        specs = [("ketama-router, balance off", base), ("ketama-router, balance factor = 125", base + 1)]
        pids = {name: p.pid for (name, _), p in zip(specs, ps)}
        time.sleep(1)
        res = interleaved(specs, workers, pids)
        print(f"### Bounded loads, {workers} worker{'s' if workers > 1 else ''} (wrk -t{workers} -c{CONNS}, {DUR} s x {ROUNDS} interleaved rounds)\n")
        table(res, "ketama-router, balance factor = 125")
        for p in ps:
            stop(p)


def access_log():
    """The access log's cost: the router with [access_log] off, JSON and
    combined, each to a file on this disk, at one worker; the lines written
    and dropped after the run."""
    log("access log")
    ps, specs = [], []
    for i, (name, extra) in enumerate([
            ("ketama-router, access log off", ""),
            ("ketama-router, access log json", f'[access_log]\npath = "{W}/access-json.log"'),
            ("ketama-router, access log combined", f'[access_log]\npath = "{W}/access-combined.log"\nformat = "combined"')]):
        port = 18400 + i
        p, admin, _ = router(port, 1, extra=extra)
        ps.append((p, admin))
        specs.append((name, port))
    pids = {name: p.pid for (name, _), (p, _) in zip(specs, ps)}
    time.sleep(1)
    res = interleaved(specs, 1, pids)
    print(f"### Access log (one worker, wrk -t1 -c{CONNS}, {DUR} s x {ROUNDS} interleaved rounds)\n")
    table(res, "ketama-router, access log off")
    for (name, _), (p, admin) in zip(specs[1:], ps[1:]):
        m = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics").read().decode()
        got = {k: re.search(rf"^{k} (\d+)", m, re.M).group(1) for k in ("ketama_access_log_lines_total", "ketama_access_log_dropped_total")}
        print(f"- {name}: {got['ketama_access_log_lines_total']} lines written, {got['ketama_access_log_dropped_total']} dropped")
    print()
    for p, _ in ps:
        stop(p)


def mix(i):
    z = (i + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


def scale():
    n = 10_000
    backends = [(f"127.0.{i // 250}.{1 + i % 250}:{WIDE_PORT}", 1 + mix(i) % 10) for i in range(n)]
    points = sum(w for _, w in backends) * 160
    bfile = os.path.join(W, "backends-10k.txt")
    with open(bfile, "w") as f:
        f.writelines(f"{a} {w}\n" for a, w in backends)
    log(f"scale: {n} backends, {points} points")
    rows = []

    def start(name, make):
        t0 = time.monotonic()
        p, port = make()
        started = time.monotonic() - t0
        time.sleep(5)
        rows.append((name, started, rss_mb(p.pid)))
        return p

    holder = {}

    def make_router(binary="router"):
        port = free_port()
        admin = free_port()
        conf = os.path.join(W, f"router-10k-{port}.toml")
        with open(conf, "w") as f:
            f.write(router_config(port, admin, 1, backends=backends, health=False))
        p = spawn([os.path.join(BIN, binary), "--config", conf])
        wait_http(port)
        holder[binary] = (p, port, admin, conf)
        return p, port

    def make_stock(binary):
        port = free_port()
        p = spawn([os.path.join(BIN, binary), "--listen", f"127.0.0.1:{port}", "--threads", "1",
                   "--no-steal", "--keepalive", "128", "--backends-file", bfile])
        wait_http(port)
        return p, port

    pr = start("ketama-router (jemalloc, compact ring)", make_router)
    pr_sys = start("ketama-router (system allocator)", lambda: make_router("router-system"))
    stop(pr_sys)
    ps = start("stock Pingora (system allocator)", lambda: make_stock("stock-system"))
    stop(ps)
    psj = start("stock Pingora (jemalloc)", lambda: make_stock("stock-jemalloc"))
    stop(psj)
    stock_rss = rows[2][2]
    print(f"### {n} backends (weights 1-10, {points} points at 160 per weight unit), one worker, health checks off\n")
    print("| process | time to serve s | RSS after start MB | RSS vs stock (system) |")
    print("|---|---:|---:|---:|")
    for name, t, r in rows:
        print(f"| {name} | {t:.2f} | {r:.1f} | {r / stock_rss:.2f} |")
    print()

    # Reloads: one backend's weight changed, through the admin API.
    p, port, admin, conf = holder["router"]
    text = open(conf).read()
    times, after = [], []
    for k in range(5):
        with open(conf, "w") as f:
            f.write(text.replace(f'weight = {backends[0][1]}\n', f'weight = {backends[0][1] + k + 1}\n', 1))
        before = rss_mb(p.pid)
        t0 = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{admin}/reload", method="POST"), timeout=60) as r:
            r.read()
        times.append((time.monotonic() - t0) * 1e3)
        swapped = time.monotonic()
        # RSS 0.5, 1 and 2 s after the swap, against RSS before the reload.
        seen = []
        for at in (0.5, 1.0, 2.0):
            time.sleep(max(0.0, swapped + at - time.monotonic()))
            seen.append(rss_mb(p.pid) / before)
        after.append(seen)
    out = subprocess.run([os.path.join(BIN, "rebuild"), bfile], capture_output=True, text=True, check=True).stdout
    m = re.search(r"update_ms ([\d.]+) build_ms ([\d.]+)", out)
    stock_update, stock_build = float(m.group(1)), float(m.group(2))
    print("| reload of a config that changes one backend | ms (median of 5) | vs stock update() |")
    print("|---|---:|---:|")
    print(f"| ketama-router `POST /reload` (read, parse, validate, build, swap; spread {spread(times, '{:.0f}')}) | {med(times):.0f} | {med(times) / stock_update:.2f} |")
    print(f"| stock Pingora `LoadBalancer::update()` (its selector build alone: {stock_build:.0f} ms) | {stock_update:.0f} | 1.00 |")
    print()
    print("| router RSS after a reload / before it (5 reloads) | median | max |")
    print("|---|---:|---:|")
    for i, at in enumerate((0.5, 1.0, 2.0)):
        v = [a[i] for a in after]
        print(f"| {at} s after the swap | {med(v):.3f} | {max(v):.3f} |")
    print()
    SUMMARY["scale"] = {"rss": rows[0][2] / stock_rss, "reload": med(times) / stock_update,
                        "rss_2s": max(a[2] for a in after), "router_rss": rows[0][2], "stock_rss": stock_rss,
                        "reload_ms": med(times), "stock_update_ms": stock_update}

    # p99 while reloads run back to back, against p99 without.
    quiet = wrk(port, 1)
    stop_flag = threading.Event()
    reloads = [0]

    def reloader():
        while not stop_flag.is_set():
            with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{admin}/reload", method="POST"), timeout=60) as r:
                r.read()
            reloads[0] += 1

    th = threading.Thread(target=reloader)
    th.start()
    busy = wrk(port, 1)
    stop_flag.set()
    th.join()
    print(f"| requests over the {n}-backend ring (wrk -t1 -c{CONNS}, {DUR} s) | requests/s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    print(f"| no reload | {quiet[0]:.0f} | {quiet[1]:.3f} | {quiet[2]:.3f} |")
    print(f"| {reloads[0]} reloads back to back (new ring built off the request path, then swapped) | {busy[0]:.0f} | {busy[1]:.3f} | {busy[2]:.3f} |")
    print(f"| p99 during reloads / p99 without | | | {busy[2] / quiet[2]:.2f} |")
    print()

    lat = {}
    for path in ("/status", "/metrics"):
        v = []
        for _ in range(5):
            t0 = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}{path}", timeout=30) as r:
                body = r.read()
            v.append((time.monotonic() - t0) * 1e3)
        lat[path] = (med(v), len(body))
    print("| admin API at 10,000 backends | ms (median of 5) | bytes |")
    print("|---|---:|---:|")
    for path, (t, size) in lat.items():
        print(f"| `GET {path}` | {t:.1f} | {size} |")
    print()
    stop(p)


def flood():
    n = 9000
    print(f"### RSS after a flood of {n} connections (each sends 2 KB of a head, held 2 s, closed; RSS 60 s later)\n")
    print("| global allocator | RSS before MB | held MB | 60 s after MB | after / before |")
    print("|---|---:|---:|---:|---:|")
    for name, binary in [("jemalloc (default)", "router"), ("system (glibc)", "router-system"), ("mimalloc", "router-mimalloc")]:
        log(f"flood: {name}")
        port = free_port()
        p, admin, _ = router(port, 1, binary=binary)
        time.sleep(1)
        before = rss_mb(p.pid)
        socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.send(b"GET /flood/%d HTTP/1.1\r\nHost: x\r\nx-pad: " % i + b"a" * 2000)
            socks.append(s)
        time.sleep(2)
        held = rss_mb(p.pid)
        for s in socks:
            s.close()
        time.sleep(60)
        after = rss_mb(p.pid)
        print(f"| {name} | {before:.1f} | {held:.1f} | {after:.1f} | {after / before:.2f} |")
        stop(p)
    print()


nginx_origins()
print(f"Machine: {os.cpu_count()} CPUs ({open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}); "
      f"wrk, the proxies and the origins share them. {DUR} s per run.\n")
for section in SECTIONS:
    if section == "tls":
        import loadbench_tls
        loadbench_tls.tls(sys.modules[__name__])
        continue
    if section in ("bodies", "conns"):
        import loadbench_bodies
        getattr(loadbench_bodies, section)(sys.modules[__name__])
        continue
    if section == "cost":
        import loadbench_cost
        loadbench_cost.cost(sys.modules[__name__])
        continue
    if section == "keys":
        import loadbench_keys
        loadbench_keys.keys(sys.modules[__name__])
        continue
    if section == "h2bodies":
        import loadbench_h2bodies
        loadbench_h2bodies.h2bodies(sys.modules[__name__])
        continue
    if section == "grpc":
        import loadbench_grpc
        loadbench_grpc.grpc(sys.modules[__name__])
        continue
    if section == "h2":
        # HTTP/2 alone: the cost section's last part.
        import loadbench_cost
        import loadbench_h2
        loadbench_h2.h2_costs(sys.modules[__name__], loadbench_cost, loadbench_cost.perf_works(), {})
        continue
    {"throughput": throughput, "alloc": alloc, "balance": balance, "scale": scale, "flood": flood,
     "access_log": access_log}[section]()
import loadbench_report
loadbench_report.summary(sys.modules[__name__])
loadbench_report.chart(sys.modules[__name__], CHART_DIR)
print("done")
