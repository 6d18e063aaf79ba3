#!/usr/bin/env python3
"""Instructions per request, counted, for router builds side by side.

CPU time per request swings by a few percent from run to run on a shared
machine; an instruction count does not. Each build runs under valgrind's
callgrind (one worker thread), is warmed up, has its counters zeroed,
serves a fixed number of requests from h2load, and has its counters
dumped: the instructions it executed divided by the requests. HTTP/1
keep-alive (h2load --h1, 4 connections) and h2c (4 connections, 10
streams each), over 1,000 paths, against one nginx origin answering 200.
Builds are run in turn, `ROUNDS` times, and the medians printed with
each build's ratio to the first.

    scripts/instructions.py REQUESTS ROUNDS LABEL=PATH [LABEL=PATH ...]

e.g. `scripts/instructions.py 4000 2 head=target/release/ketama-router
before=target/loadbench-before/router`. Needs valgrind, h2load, nginx.
`INSTRUCTIONS_KEEP=DIR` keeps each run's callgrind dump there, to read
with `callgrind_annotate` (where the instructions went).
"""

import glob
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ORIGIN = 18950
PORT = 18960
ADMIN = 18961


def wait_port(port, proc=None):
    for _ in range(1200):
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"instructions: the process for port {port} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"instructions: nothing listens on {port}")


def origin(w):
    conf = os.path.join(w, "origin.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; daemon off; pid {w}/origin.pid; error_log {w}/origin.err crit;
events {{ worker_connections 1024; }}
http {{ access_log off; keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{ORIGIN}; location / {{ return 200 "ok\\n"; }} }} }}
""")
    p = subprocess.Popen(["nginx", "-p", w, "-c", conf])
    wait_port(ORIGIN, p)
    return p


def router_conf(w):
    conf = os.path.join(w, "router.toml")
    with open(conf, "w") as f:
        f.write(f"""[server]
listen = ["127.0.0.1:{PORT}"]
threads = 1
h2c = true
keepalive_requests = 1000000
[admin]
listen = "127.0.0.1:{ADMIN}"
auth = false
[ring]
layout = "compact"
[health]
enabled = false
[[backends]]
address = "127.0.0.1:{ORIGIN}"
weight = 1
""")
    return conf


def uris(w, scheme):
    path = os.path.join(w, f"uris-{scheme}.txt")
    with open(path, "w") as f:
        for i in range(1000):
            f.write(f"{scheme}://127.0.0.1:{PORT}/assets/{i % 37}/object-{i}.jpg?v={i % 7}\n")
    return path


def h2load(w, n, h1):
    cmd = ["h2load", "-n", str(n), "-c4", "-t1", "-i", uris(w, "http")]
    cmd += ["--h1", "-m1"] if h1 else ["-m10"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ok = re.search(r"(\d+) succeeded", out)
    if not ok or int(ok.group(1)) != n:
        raise SystemExit(f"instructions: h2load: {out}")


def count(w, binary, conf, n, h1, keep=None):
    """Instructions the router `binary` executed per request over `n`;
    callgrind's dump copied to `keep` when given (for callgrind_annotate)."""
    out = os.path.join(w, "cg.out")
    for f in glob.glob(out + "*"):
        os.remove(f)
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          "--dump-instr=no", binary, "--config", conf],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(PORT, p)
        h2load(w, n // 4, h1)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True, capture_output=True)
        h2load(w, n, h1)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True, capture_output=True)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    dumps = sorted(glob.glob(out + ".*"), key=os.path.getmtime)
    if not dumps:
        raise SystemExit("instructions: callgrind wrote no dump")
    if keep:
        shutil.copy(dumps[-1], keep)
    with open(dumps[-1]) as f:
        m = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    return int(m.group(1)) / n


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    n, rounds = int(sys.argv[1]), int(sys.argv[2])
    builds = [a.split("=", 1) for a in sys.argv[3:]]
    for name in ("valgrind", "callgrind_control", "h2load", "nginx"):
        if shutil.which(name) is None:
            raise SystemExit(f"instructions: {name} is not installed")
    w = tempfile.mkdtemp(prefix="instructions.")
    o = origin(w)
    try:
        conf = router_conf(w)
        res = {(b, h1): [] for b, _ in builds for h1 in (True, False)}
        for r in range(rounds):
            for h1 in (True, False):
                for label, path in builds:
                    keep = os.environ.get("INSTRUCTIONS_KEEP")
                    if keep:
                        os.makedirs(keep, exist_ok=True)
                        keep = os.path.join(keep, f"{label}-{'h1' if h1 else 'h2c'}-{r + 1}.out")
                    res[(label, h1)].append(count(w, path, conf, n, h1, keep))
                    print(f"  round {r + 1}/{rounds} {'HTTP/1' if h1 else 'h2c'} {label}: "
                          f"{res[(label, h1)][-1]:.0f}", file=sys.stderr)
        print(f"| build | protocol | instructions per request (min-max) | / {builds[0][0]}'s |")
        print("|---|---|---:|---:|")
        for h1 in (True, False):
            first = statistics.median(res[(builds[0][0], h1)])
            for label, _ in builds:
                v = res[(label, h1)]
                med = statistics.median(v)
                print(f"| {label} | {'HTTP/1 keep-alive' if h1 else 'h2c'} | {med:,.0f} "
                      f"({min(v):,.0f}-{max(v):,.0f}) | {med / first:.3f} |")
    finally:
        o.send_signal(signal.SIGTERM)
        o.wait()
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
