#!/usr/bin/env python3
"""Regenerates the gRPC ring_hash golden traces from a live gRPC C core
(Python's grpcio).

Servers: generic gRPC handlers on loopback ports chosen by the kernel, each
answering its own port. The client: target `ipv4:127.0.0.1:P1,...` in a
shuffled order with some addresses listed twice or more (gRPC adds their
weights), service config `{"loadBalancingConfig":[{"ring_hash_experimental":
{"minRingSize":M,"maxRingSize":X,"requestHashHeader":"x-key"}}]}`, and each
call's metadata `x-key: KEY` (gRFC A76; the C core needs
GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY=true). The server that
answers is the one gRPC's ring picked.

Writes, for each list NAME: NAME.servers (a ketama servers file: each
address once, in the order of its first listing, its weight the times it
was listed), NAME.compat (the `--compat` that names the ring: gRPC caps
both sizes at its ring_size_cap, 4096), NAME.keys (one key per line) and
NAME.trace (the server gRPC picked for each key). Deterministic for a given
seed but for the ports.

Usage: python3 regen.py [--out DIR] [--keys N] [--quick] [--seed S]
  --quick: three lists of random sizes (3 to 50 servers, ring sizes 10 to
  the cap), used by the live test in every run; default: the committed
  lists. Installs grpcio with pip when missing.
"""

import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CAP = 4096

# (name, servers, extra listings, minRingSize, maxRingSize)
CASES = [
    ("g-3-r10", 3, 0, 10, 10),
    ("g-3-r1024", 3, 0, 1024, 1024),
    ("g-5-w-r64", 5, 3, 64, 4096),
    ("g-8-r4096", 8, 0, 1024, 4096),
    ("g-20-w-r512", 20, 8, 512, 512),
    ("g-50-r-cap", 50, 0, 4096, 8388608),
    ("g-50-w-r100", 50, 20, 100, 200),
]


def ensure_grpc():
    try:
        import grpc  # noqa: F401
    except ImportError:
        print("installing grpcio", file=sys.stderr)
        base = [sys.executable, "-m", "pip", "install", "-q", "grpcio"]
        if subprocess.run(base).returncode != 0:
            subprocess.run(base + ["--break-system-packages"], check=True)


def start_servers(grpc, n):
    from concurrent import futures
    out = []
    for _ in range(n):
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        port = s.add_insecure_port("127.0.0.1:0")

        def handler(req, ctx, port=port):
            return str(port).encode()

        h = grpc.method_handlers_generic_handler(
            "probe.P", {"Who": grpc.unary_unary_rpc_method_handler(handler)})
        s.add_generic_rpc_handlers((h,))
        s.start()
        out.append((s, port))
    return out


def record(grpc, name, n, extra, min_ring, max_ring, keys, rng, out_dir):
    servers = start_servers(grpc, n)
    try:
        addrs = [f"127.0.0.1:{p}" for _, p in servers]
        rng.shuffle(addrs)
        listed = addrs + [rng.choice(addrs) for _ in range(extra)]
        rng.shuffle(listed)
        cfg = {"loadBalancingConfig": [{"ring_hash_experimental": {
            "minRingSize": min_ring, "maxRingSize": max_ring, "requestHashHeader": "x-key"}}]}
        ch = grpc.insecure_channel("ipv4:" + ",".join(listed),
                                   options=[("grpc.service_config", json.dumps(cfg))])
        call = ch.unary_unary("/probe.P/Who")
        picks = []
        for k in keys:
            port = call(b"", metadata=(("x-key", k),), timeout=30, wait_for_ready=True)
            picks.append(f"127.0.0.1:{port.decode()}")
        ch.close()
    finally:
        for s, _ in servers:
            s.stop(0)
    weights = {}
    for a in listed:
        weights[a] = weights.get(a, 0) + 1
    with open(os.path.join(out_dir, f"{name}.servers"), "w") as f:
        f.write(f"# gRPC target order ({len(listed)} listings), grpcio {grpc.__version__}\n")
        for a, w in weights.items():
            f.write(f"{a} {w}\n")
    lo, hi = min(min_ring, CAP), min(max_ring, CAP)
    with open(os.path.join(out_dir, f"{name}.compat"), "w") as f:
        f.write(f"envoy-ring-hash:min={lo},max={hi}\n")
    with open(os.path.join(out_dir, f"{name}.keys"), "w") as f:
        f.write("".join(k + "\n" for k in keys))
    with open(os.path.join(out_dir, f"{name}.trace"), "w") as f:
        f.write("".join(p + "\n" for p in picks))
    print(f"{name}: {len(set(picks))} of {n} servers picked", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=56)
    a = ap.parse_args()
    ensure_grpc()
    os.environ["GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY"] = "true"
    import grpc
    rng = random.Random(a.seed)
    keys = [f"/obj/{i}" for i in range(a.keys // 2)] + \
        [f"k{rng.getrandbits(48):x}" for _ in range(a.keys - a.keys // 2)]
    cases = CASES
    if a.quick:
        cases = []
        for i in range(3):
            n = rng.randint(3, 50)
            lo = rng.choice([10, 64, 300, 1024, CAP])
            cases.append((f"q-{i}", n, rng.randint(0, n), lo, rng.choice([lo, CAP, 8388608])))
    for c in cases:
        record(grpc, *c, keys, rng, a.out)


if __name__ == "__main__":
    main()
