"""The `grpc` section: a unary gRPC call through ketama-router
(`h2c = true` backends, the key from the `x-key` metadata) against nginx
1.22's `grpc_pass` (`hash $http_x_key consistent`, upstream keepalive),
one worker each, in front of the same live grpcio servers
(crates/ketama-router/tests/grpc/peer.py: `test.Echo/Unary` echoes).

Per call, over `h2load -c8 -m10 -t1` runs (a fixed 100-byte gRPC
message, `content-type: application/grpc`, `te: trailers`, each
connection's calls on one key, eight keys) against each proxy in
interleaved rounds: CPU microseconds and system calls of the proxy's
process from `perf stat -p PID` (CPU from /proc/PID/stat where perf is
missing); every call must end in `grpc-status: 0` (checked on a sample
with grpcio first: h2load counts HTTP statuses only).
"""

import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "crates", "ketama-router", "tests", "grpc", "peer.py")


def servers(lb, n):
    """n grpcio servers, each a process of its own (one GIL each)."""
    procs, addrs = [], []
    for _ in range(n):
        p = subprocess.Popen([sys.executable, PEER, "servers", "1"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        addrs += [f"127.0.0.1:{port}" for port in json.loads(p.stdout.readline())["ports"]]
        procs.append(p)
    return procs, addrs


def nginx_grpc(lb, port, backends):
    conf = os.path.join(lb.W, f"grpc-{port}.conf")
    ups = "\n".join(f"    server {b} max_fails=0;" for b in backends)
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; master_process off; daemon off; pid {lb.W}/grpc-{port}.pid; error_log {lb.W}/grpc-{port}.err crit;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000; http2_max_requests 1000000;
  upstream grpc_backends {{ hash $http_x_key consistent; keepalive 128;
{ups}
  }}
  server {{ listen 127.0.0.1:{port} http2; location / {{ grpc_pass grpc://grpc_backends; }} }}
}}
""")
    p = lb.spawn(["nginx", "-p", lb.W, "-c", conf])
    import loadbench_h2
    loadbench_h2.wait_port(port)
    return p


def router_grpc(lb, port, backends):
    admin = lb.free_port()
    conf = os.path.join(lb.W, f"router-grpc-{port}.toml")
    lines = ["[server]", f'listen = ["127.0.0.1:{port}"]', "threads = 1", "h2c = true",
             "keepalive_requests = 1000000", "[admin]", f'listen = "127.0.0.1:{admin}"', "auth = false",
             "[key]", 'source = "header"', 'header = "x-key"', "[health]", "grpc = true"]
    for b in backends:
        lines += ["[[backends]]", f'address = "{b}"', "h2c = true"]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = lb.spawn([os.path.join(lb.BIN, "router"), "--config", conf])
    import loadbench_h2
    loadbench_h2.wait_port(port)
    return p


def check_calls(port):
    """A sample of calls with grpcio through the proxy: all grpc-status 0."""
    for key in ("a", "b", "c"):
        out = subprocess.run([sys.executable, PEER, "call", f"127.0.0.1:{port}", "unary", "100", "--key", key],
                             capture_output=True, text=True, check=True).stdout
        if json.loads(out).get("code") != 0:
            raise SystemExit(f"loadbench: a gRPC call through {port} failed: {out}")


def payload(lb):
    path = os.path.join(lb.W, "grpc-100.bin")
    with open(path, "wb") as f:
        f.write(b"\x00" + (100).to_bytes(4, "big") + b"x" * 100)
    return path


def counted_run(lb, cost, port, pid, use_perf, body):
    """One h2load run per key, eight in all, with the proxy's process
    counted: (calls/s, CPU us, syscalls), each per call."""
    import loadbench_h2
    per = max(1, lb.DUR // 8)
    u0, s0 = cost.proc_cpu(pid)
    total, secs, calls_n, cpu_ms = 0, 0.0, 0.0, 0.0
    for k in range(8):
        cmd = ["h2load", "-c8", "-m10", "-t1", "-D", str(per), "-d", body,
               "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", f"x-key: key-{k}",
               f"http://127.0.0.1:{port}/test.Echo/Unary"]
        n, out, counts = loadbench_h2.run_h2load(cmd, port, pid, use_perf)
        total += n
        secs += float(re.search(r"finished in ([\d.]+)s", out).group(1))
        cpu_ms += counts.get("task-clock", 0.0)
        calls_n += counts.get("raw_syscalls:sys_enter", 0.0)
    u1, s1 = cost.proc_cpu(pid)
    cpu = cpu_ms * 1e3 / total if use_perf else (u1 - u0 + s1 - s0) * 1e6 / total
    return total / secs, cpu, (calls_n / total if use_perf else None)


def grpc(lb):
    import loadbench_cost as cost
    use_perf = cost.perf_works()
    peers, backends = servers(lb, 4)
    base = 18940
    proxies = [("ketama-router", base, router_grpc(lb, base, backends)),
               ("nginx grpc_pass", base + 1, nginx_grpc(lb, base + 1, backends))]
    for _, port, _ in proxies:
        check_calls(port)
    body = payload(lb)
    res = {name: [] for name, _, _ in proxies}
    for r in range(lb.ROUNDS):
        for name, port, p in proxies[r % 2:] + proxies[:r % 2]:
            res[name].append(counted_run(lb, cost, port, p.pid, use_perf, body))
        lb.log(f"  grpc round {r + 1}/{lb.ROUNDS}")
    med = statistics.median
    ref = res["nginx grpc_pass"]
    print(f"### gRPC unary calls (h2load -c8 -m10 -t1, 100-byte message, 8 keys, {lb.DUR} s a round, "
          f"{lb.ROUNDS} interleaved rounds, medians; one worker each, 4 grpcio backends, a process each)\n")
    print("| proxy | calls/s | CPU us / call (min-max) | system calls / call | CPU / nginx's (min-max) |")
    print("|---|---:|---:|---:|---:|")
    for name, _, _ in proxies:
        runs = res[name]
        cpu = [x[1] for x in runs]
        ratio = [a[1] / b[1] for a, b in zip(runs, ref)]
        calls = [x[2] for x in runs if x[2] is not None]
        print(f"| {name} | {med([x[0] for x in runs]):.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
              f"{cost.fmt(med(calls) if calls else None)} | {med(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) |")
    print()
    for _, _, p in proxies:
        lb.stop(p)
    for p in peers:
        p.stdin.close()
        p.wait()
