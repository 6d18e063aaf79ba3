"""The `h2bodies` section: bodies relayed between two HTTP/2 peers, the
router built from the current code against a router built from an
earlier commit (`BIN_DIR/router-before`, when present: built by hand,
`git worktree add ../before COMMIT && cargo build --release -p
ketama-router`), one worker each, in front of one nginx serving files
over h2c (`listen ... http2`, each router's only backend, `h2c = true`).

Per request, over `h2load -c4 -m8 -t1` runs of one file (16 KiB and
256 KiB) in interleaved rounds: CPU microseconds and system calls of the
router's process from `perf stat -p PID` (CPU from /proc/PID/stat where
perf is missing), and the ratio of the current build's CPU to the
earlier build's in the same round. What it measures: a backend's DATA
frames handed on to the client's stream (the copy the current code no
longer makes).
"""

import os
import re
import statistics
import subprocess


def nginx_files(lb, port):
    root = os.path.join(lb.W, "h2files")
    os.makedirs(root, exist_ok=True)
    for size in (16, 256):
        with open(os.path.join(root, f"{size}k.bin"), "wb") as f:
            f.write(os.urandom(size * 1024))
    conf = os.path.join(lb.W, f"h2files-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1; master_process off; daemon off; pid {lb.W}/h2files-{port}.pid; error_log {lb.W}/h2files-{port}.err crit;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 1000000; http2_max_requests 1000000;
  server {{ listen 127.0.0.1:{port} http2; root {root}; }}
}}
""")
    p = lb.spawn(["nginx", "-p", lb.W, "-c", conf])
    import loadbench_h2
    loadbench_h2.wait_port(port)
    return p


def router(lb, port, backend, binary):
    admin = lb.free_port()
    conf = os.path.join(lb.W, f"router-h2bodies-{port}.toml")
    lines = ["[server]", f'listen = ["127.0.0.1:{port}"]', "threads = 1", "h2c = true",
             "keepalive_requests = 1000000", "[admin]", f'listen = "127.0.0.1:{admin}"', "auth = false",
             "[health]", "enabled = false", "[[backends]]", f'address = "{backend}"', "h2c = true"]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    p = lb.spawn([os.path.join(lb.BIN, binary), "--config", conf])
    import loadbench_h2
    loadbench_h2.wait_port(port)
    return p


def counted(lb, cost, port, pid, use_perf, size):
    import loadbench_h2
    cmd = ["h2load", "-c4", "-m8", "-t1", "-D", str(lb.DUR), f"http://127.0.0.1:{port}/{size}k.bin"]
    u0, s0 = cost.proc_cpu(pid)
    reqs, out, counts = loadbench_h2.run_h2load(cmd, port, pid, use_perf)
    u1, s1 = cost.proc_cpu(pid)
    rps = float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out).group(1))
    cpu = counts["task-clock"] * 1e3 / reqs if "task-clock" in counts else (u1 - u0 + s1 - s0) * 1e6 / reqs
    calls = counts["raw_syscalls:sys_enter"] / reqs if "raw_syscalls:sys_enter" in counts else None
    return rps, cpu, calls


def h2bodies(lb):
    import loadbench_cost as cost
    use_perf = cost.perf_works()
    backend_port = 18960
    files = nginx_files(lb, backend_port)
    builds = [b for b in ("router-before", "router") if os.path.exists(os.path.join(lb.BIN, b))]
    routers = [(b, 18961 + i, router(lb, 18961 + i, f"127.0.0.1:{backend_port}", b)) for i, b in enumerate(builds)]
    med = statistics.median
    print(f"### Bodies between two HTTP/2 peers (h2load -c4 -m8 -t1 GET through the router to nginx over h2c, "
          f"{lb.DUR} s a round, {lb.ROUNDS} interleaved rounds, medians; one worker each)\n")
    print("| file | build | requests/s | CPU us / request (min-max) | system calls / request | CPU / router-before's (min-max) |")
    print("|---|---|---:|---:|---:|---:|")
    for size in (16, 256):
        res = {name: [] for name, _, _ in routers}
        for r in range(lb.ROUNDS):
            for name, port, p in routers[r % len(routers):] + routers[:r % len(routers)]:
                res[name].append(counted(lb, cost, port, p.pid, use_perf, size))
            lb.log(f"  h2bodies {size}k round {r + 1}/{lb.ROUNDS}")
        ref = res.get("router-before")
        for name, _, _ in routers:
            runs = res[name]
            cpu = [x[1] for x in runs]
            calls = [x[2] for x in runs if x[2] is not None]
            ratio = "-"
            if ref:
                rs = [a[1] / b[1] for a, b in zip(runs, ref)]
                ratio = f"{med(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})"
            print(f"| {size} KiB | {name} | {med([x[0] for x in runs]):.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
                  f"{cost.fmt(med(calls) if calls else None, '{:.1f}')} | {ratio} |")
    print()
    for _, _, p in routers:
        lb.stop(p)
    lb.stop(files)
