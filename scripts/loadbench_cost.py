"""The `cost` section of scripts/loadbench.sh: what one small proxied
request costs each proxy, counted rather than timed (counts per request
hold on a shared machine where requests/s swing), and what an idle
keep-alive connection holds.

Per request, over a `wrk -t1 -c32` run against each proxy in interleaved
rounds (one worker each, the same four nginx origins answering 3 bytes):
CPU microseconds (user + system) and system calls and context switches
from `perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p
PID`, user microseconds from /proc/PID/stat; where perf or its
tracepoints are missing, CPU from /proc/PID/stat alone and the other
columns are "-". The same for clients that pause 150 ms before each
request (`wrk -c400` with a delay: the router parks each such connection
between its requests). Then RSS per idle keep-alive connection at 2,000
and 10,000 connections (each made one request and stayed open), plain
listeners; per stalled upload; and per connection after a burst (2,000
connections sending a request at once). Then over TLS (1.3, one ECDSA
P-256 certificate), the router's engine against nginx: CPU per
keep-alive request and RSS per idle connection at 2,000. Then HTTP/2,
h2c and over TLS, against nginx's `listen ... http2`
(scripts/loadbench_h2.py).

Proxies: ketama-router (its own engine), stock Pingora (examples/
stock_pingora.rs, jemalloc), nginx (`hash $request_uri consistent`,
keepalive 128). The router's former path through Pingora's HTTP/1 proxy
was measured beside them up to commit 613db7c (`KETAMA_HTTP1=pingora`);
docs/router-benchmarks.md keeps those figures.
"""

import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import time



def proc_cpu(pid):
    """(user, system) CPU seconds of a process so far, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / hz, int(fields[12]) / hz


def perf_works():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-e", "task-clock,raw_syscalls:sys_enter", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "raw_syscalls" in r.stderr and "not supported" not in r.stderr


def pause_lua(lb):
    """wrk's request script with a 150 ms pause before each request."""
    path = os.path.join(lb.W, "pause.lua")
    with open(lb.LUA) as f, open(path, "w") as out:
        out.write(f.read() + "\nfunction delay()\n  return 150\nend\n")
    return path


def counted_run(lb, port, pid, use_perf, scheme="http", conns=None, script=None):
    """One wrk run with the proxy's process counted: (requests/s, CPU us,
    user us, syscalls, context switches), each per request."""
    wrk = ["wrk", "-t1", f"-c{conns or lb.CONNS}", f"-d{lb.DUR}s", "-s", script or lb.LUA,
           f"{scheme}://127.0.0.1:{port}/"]
    u0, s0 = proc_cpu(pid)
    if use_perf:
        r = subprocess.run(["perf", "stat", "-x", ",", "-e", "task-clock,context-switches,raw_syscalls:sys_enter",
                            "-p", str(pid), "--"] + wrk, capture_output=True, text=True, check=True)
        out, stat = r.stdout, r.stderr
    else:
        out, stat = subprocess.run(wrk, capture_output=True, text=True, check=True).stdout, ""
    u1, s1 = proc_cpu(pid)
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    counts = {}
    for line in stat.splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[0].replace(".", "", 1).isdigit():
            counts[parts[2]] = float(parts[0])
    cpu = counts["task-clock"] * 1e3 / reqs if "task-clock" in counts else (u1 - u0 + s1 - s0) * 1e6 / reqs
    sys_calls = counts["raw_syscalls:sys_enter"] / reqs if "raw_syscalls:sys_enter" in counts else None
    switches = counts["context-switches"] / reqs if "context-switches" in counts else None
    return rps, cpu, (u1 - u0) * 1e6 / reqs, sys_calls, switches


def idle_kib(lb, pid, port, n, tls_ctx=None):
    """RSS per idle keep-alive connection: n connections each make one
    request, read its answer and stay open."""
    def open_idle(i):
        s = socket.create_connection(("127.0.0.1", port))
        if tls_ctx:
            s = tls_ctx.wrap_socket(s, server_hostname="bench.test")
        s.sendall(b"GET /idle/%d HTTP/1.1\r\nHost: bench.test\r\n\r\n" % i)
        got = b""
        while not got.endswith(b"ok\n"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit(f"loadbench: port {port} closed an idle connection: {got!r}")
            got += chunk
        return s
    return held_kib(lb, pid, open_idle, n)


def held_kib(lb, pid, open_one, n):
    """RSS the proxy holds per connection while n connections made by
    open_one(i) stay open (2 s to settle, then closed)."""
    before = lb.rss_mb(pid)
    socks = [open_one(i) for i in range(n)]
    time.sleep(2)
    held = lb.rss_mb(pid)
    for s in socks:
        s.close()
    time.sleep(2)
    return (held - before) * 1e6 / n / 1024


def stalled_kib(lb, pid, port, n=300):
    """RSS per stalled upload: n connections each send a 1 MiB POST's head
    and one byte of its body, then nothing (the origins wait for the
    body too)."""
    def open_stalled(i):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /wait/%d HTTP/1.1\r\nHost: bench.test\r\nContent-Length: 1048576\r\n\r\nx" % i)
        return s
    return held_kib(lb, pid, open_stalled, n)


def burst_kib(lb, pid, port, n=2000, settle=2):
    """RSS per connection after a burst: n keep-alive connections opened,
    then a request sent on every one at once, every answer read, and the
    connections left idle `settle` seconds (what a burst leaves in pools
    stays counted; jemalloc's background thread returns freed pages after
    its 10 s decay, so 2 s counts them and 12 s does not)."""
    import selectors
    before = lb.rss_mb(pid)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    for i, s in enumerate(socks):
        s.sendall(b"GET /burst/%d HTTP/1.1\r\nHost: bench.test\r\n\r\n" % i)
    sel = selectors.DefaultSelector()
    got = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
    left = n
    deadline = time.time() + 30
    while left and time.time() < deadline:
        for key, _ in sel.select(1):
            chunk = key.fileobj.recv(4096)
            got[key.fileobj] += chunk
            if got[key.fileobj].endswith(b"ok\n") or not chunk:
                sel.unregister(key.fileobj)
                left -= 1
    if left:
        raise SystemExit(f"loadbench: {left} of a burst of {n} got no answer from {port}")
    time.sleep(settle)
    held = lb.rss_mb(pid)
    for s in socks:
        s.close()
    time.sleep(2)
    return (held - before) * 1e6 / n / 1024


def fmt(v, f="{:.2f}"):
    return "-" if v is None else f.format(v)


def cost(lb):
    import loadbench_bodies
    loadbench_bodies.raise_file_limit(15_000)
    use_perf = perf_works()
    lb.log(f"cost (perf stat: {'yes' if use_perf else 'no, /proc only'})")
    base = 18800
    procs = [("ketama-router", base, lb.router(base, 1, server_extra="max_connections = 12000")[0])]
    # COST_WITHOUT_STOCK=1 leaves stock Pingora out (an A/B of the router
    # against its baseline and nginx needs no Pingora build).
    if not os.environ.get("COST_WITHOUT_STOCK"):
        procs.append(("stock Pingora (jemalloc)", base + 2, lb.stock(base + 2, 1, binary="stock-jemalloc")))
    # BASELINE_BIN=DIR: DIR/router, built before a change, in the same
    # interleaved rounds (an A/B of that change).
    baseline = os.environ.get("BASELINE_BIN")
    if baseline:
        procs.append(("ketama-router (baseline)", base + 4,
                      lb.router(base + 4, 1, binary=os.path.join(os.path.abspath(baseline), "router"),
                                server_extra="max_connections = 12000")[0]))
    procs.append(("nginx (1 worker, hash $request_uri consistent, keepalive 128)", base + 3,
                  loadbench_bodies.nginx(lb, base + 3, False, conns=12000)))
    pids = {}
    for name, port, p in procs:
        pid = p.pid
        # nginx: the worker serves, the master only waits.
        kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids[name] = int(kids[0]) if kids else pid
    res = {name: [] for name, _, _ in procs}
    for r in range(lb.ROUNDS):
        order = procs[r % len(procs):] + procs[:r % len(procs)]
        for name, port, _ in order:
            res[name].append(counted_run(lb, port, pids[name], use_perf))
        lb.log(f"  round {r + 1}/{lb.ROUNDS}")
    nginx = procs[-1][0]
    med = statistics.median
    print(f"### What a small request costs (wrk -t1 -c{lb.CONNS}, {lb.DUR} s runs, {lb.ROUNDS} interleaved rounds, medians; one worker each)\n")
    print("| proxy | requests/s | CPU us / request (min-max) | user us | system calls | context switches | CPU / nginx's | requests/s / nginx's (min-max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for name, runs in res.items():
        rps = [x[0] for x in runs]
        cpu = [x[1] for x in runs]
        user = [x[2] for x in runs]
        sc = [x[3] for x in runs if x[3] is not None]
        cs = [x[4] for x in runs if x[4] is not None]
        cpu_ratio = [a[1] / b[1] for a, b in zip(runs, res[nginx])]
        rps_ratio = [a[0] / b[0] for a, b in zip(runs, res[nginx])]
        print(f"| {name} | {med(rps):.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | {med(user):.1f} | "
              f"{fmt(med(sc) if sc else None)} | {fmt(med(cs) if cs else None, '{:.3f}')} | {med(cpu_ratio):.2f} | "
              f"{med(rps_ratio):.2f} ({min(rps_ratio):.2f}-{max(rps_ratio):.2f}) |")
        summary[name] = {"rps": med(rps), "cpu_us": med(cpu), "user_us": med(user),
                         "syscalls": med(sc) if sc else None, "cpu_vs_nginx": med(cpu_ratio),
                         "rps_vs_nginx": med(rps_ratio)}
    print()
    print("### RSS per idle keep-alive connection (each made one request, then stayed open), KiB\n")
    print("| proxy | 2,000 connections | 10,000 connections | / nginx's at 2,000 | / nginx's at 10,000 |")
    print("|---|---:|---:|---:|---:|")
    idle = {}
    for name, port, _ in procs:
        idle[name] = [idle_kib(lb, pids[name], port, n) for n in (2000, 10000)]
    for name, (a, b) in idle.items():
        na, nb = idle[nginx]
        print(f"| {name} | {a:.2f} | {b:.2f} | {a / na:.2f} | {b / nb:.2f} |")
    print()
    summary["idle_kib"] = idle
    stalled = {name: stalled_kib(lb, pids[name], port) for name, port, _ in procs}
    print("### RSS per stalled upload (300 POSTs of 1 MiB that sent one byte of their body), KiB\n")
    print("| proxy | KiB each | / nginx's |")
    print("|---|---:|---:|")
    for name, v in stalled.items():
        print(f"| {name} | {v:.2f} | {v / stalled[nginx]:.2f} |")
    print()
    summary["stalled_kib"] = stalled
    burst = {name: burst_kib(lb, pids[name], port) for name, port, _ in procs}
    print("### RSS per connection after a burst (2,000 keep-alive connections, a request on each at once, then idle), KiB\n")
    print("| proxy | KiB each | / nginx's |")
    print("|---|---:|---:|")
    for name, v in burst.items():
        print(f"| {name} | {v:.2f} | {v / burst[nginx]:.2f} |")
    print()
    summary["burst_kib"] = burst

    pause = pause_lua(lb)
    paused = {name: [] for name, _, _ in procs}
    for r in range(2):
        for name, port, _ in procs[r % len(procs):] + procs[:r % len(procs)]:
            paused[name].append(counted_run(lb, port, pids[name], use_perf, conns=400, script=pause))
    print("### Clients that pause 150 ms before each request (wrk -c400, 2 interleaved rounds, medians)\n")
    print("| proxy | requests/s | CPU us / request | system calls | CPU / nginx's |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in paused.items():
        cpu = med([x[1] for x in runs])
        sc = [x[3] for x in runs if x[3] is not None]
        print(f"| {name} | {med([x[0] for x in runs]):.0f} | {cpu:.1f} | {fmt(med(sc) if sc else None)} | "
              f"{cpu / med([x[1] for x in paused[nginx]]):.2f} |")
    print()
    summary["paused_cpu_us"] = {name: med([x[1] for x in runs]) for name, runs in paused.items()}
    for _, _, p in procs:
        lb.stop(p)
    tls_costs(lb, use_perf, summary)
    import loadbench_h2
    loadbench_h2.h2_costs(lb, sys.modules[__name__], use_perf, summary)
    lb.SUMMARY["cost"] = summary


def tls_costs(lb, use_perf, summary):
    """The router's engine and nginx over TLS: CPU per keep-alive request
    and RSS per idle connection."""
    import loadbench_tls
    cert, key = loadbench_tls.certificate(lb)
    base = 18820
    router = loadbench_tls.router_tls(lb, base, cert, key, True,
                                      server_extra="max_connections = 12000")
    nginx = loadbench_tls.nginx_tls(lb, base + 1, cert, key, True)
    procs = [("ketama-router", base, router.pid), ("nginx", base + 1, nginx.pid)]
    res = {name: [] for name, _, _ in procs}
    for r in range(lb.ROUNDS):
        for name, port, pid in procs[r % 2:] + procs[:r % 2]:
            res[name].append(counted_run(lb, port, pid, use_perf, scheme="https"))
    ctx = ssl.create_default_context(cafile=cert)
    idle = {name: idle_kib(lb, pid, port, 2000, tls_ctx=ctx) for name, port, pid in procs}
    med = statistics.median
    print(f"### Over TLS (HTTPS/1.1 keep-alive, wrk -t1 -c{lb.CONNS}, {lb.ROUNDS} interleaved rounds, medians)\n")
    print("| server | requests/s | CPU us / request (min-max) | system calls | CPU / nginx's | RSS per idle TLS connection at 2,000, KiB |")
    print("|---|---:|---:|---:|---:|---:|")
    base_cpu = med([x[1] for x in res["nginx"]])
    for name, runs in res.items():
        cpu = [x[1] for x in runs]
        sc = [x[3] for x in runs if x[3] is not None]
        print(f"| {name} | {med([x[0] for x in runs]):.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
              f"{fmt(med(sc) if sc else None)} | {med(cpu) / base_cpu:.2f} | {idle[name]:.2f} |")
    print()
    summary["tls"] = {name: {"cpu_us": med([x[1] for x in runs]), "idle_kib": idle[name]} for name, runs in res.items()}
    lb.stop(router)
    lb.stop(nginx)
