#!/usr/bin/env python3
"""Regenerates the nginx golden traces: real nginx, `hash $request_uri consistent`.

For each server list below, this script
  1. writes the list as a ketama servers file (golden-N.servers),
  2. starts Debian's nginx on 127.0.0.1 with an upstream of exactly those servers
     (max_fails=0, `down` where marked) and `proxy_next_upstream off`, so a refused
     connection still logs the upstream nginx chose and marks nothing failed,
  3. sends every URI (random ones, plus URIs that land on points where two servers'
     hashes collide, so nginx's tie rule is recorded too),
  4. reads `$request_uri,$upstream_addr` from nginx's access log and maps each
     upstream address back to the server string as written (by port; by path for
     unix sockets), writing golden-N.csv as `URI,SERVER`.

Nothing listens on the upstream addresses: every proxied request gets a 502, which
is fine, the choice is what is recorded. Needs root (it adds loopback host names to
/etc/hosts and runs nginx) and only loopback addresses.

Usage: python3 regen.py   (from any directory; writes next to this file)
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
LISTEN = 18080
HOSTS = {  # names that resolve to exactly one loopback address
    "cache-a.ketama.test": "127.0.0.1",
    "cache-b.ketama.test": "127.0.0.1",
    "cache-c.ketama.test": "127.0.0.1",
    "origin.ketama.test": "127.0.0.1",
}


def split(server):
    """Host and port as ngx_http_upstream_init_chash splits them."""
    if server[:5].lower() == "unix:":
        return server[5:], ""
    j = len(server)
    while j > 0 and server[j - 1].isdigit():
        j -= 1
    if j > 0 and server[j - 1] == ":":
        return server[: j - 1], server[j:]
    return server, ""


def points(server, weight):
    host, port = split(server)
    base = (host + "\0" + port).encode()
    prev, out = 0, []
    for _ in range(weight * 160):
        prev = zlib.crc32(base + prev.to_bytes(4, "little"))
        out.append(prev)
    return out


def collide(servers, candidates, want):
    """Adds up to `want` candidate servers (weight 1) whose points collide with
    points already on the ring."""
    taken = {}
    for s, w, _ in servers:
        for h in points(s, w):
            taken.setdefault(h, s)
    added = []
    for cand in candidates:
        if len(added) == want:
            break
        if any(h in taken for h in points(cand, 1)):
            added.append((cand, 1, False))
            for h in points(cand, 1):
                taken.setdefault(h, cand)
    return added


def lists():
    rnd = random.Random(20261129)
    # 1: IPv4 across 127/8, weights 1..10, one down, two searched collisions.
    l1 = [(f"127.0.{i}.{i + 1}:{9000 + i}", rnd.randint(1, 10), i == 4) for i in range(12)]
    l1 += collide(l1, (f"127.0.0.1:{p}" for p in range(20000, 60000)), 2)
    # 2: every server form: bracketed IPv6, host names with ports, a bare host
    # name (nginx connects to port 80), unix: paths (one with an upper-case
    # prefix, which nginx matches case-insensitively), weights 1..10, a down one.
    l2 = [
        ("[::1]:9101", 3, False),
        ("[::1]:9102", 1, False),
        ("[0:0:0:0:0:0:0:1]:9103", 2, False),
        ("cache-a.ketama.test:9104", 10, False),
        ("cache-b.ketama.test:9105", 5, False),
        ("cache-c.ketama.test:9106", 1, True),
        ("origin.ketama.test", 4, False),
        ("unix:/tmp/ketama-golden-1.sock", 2, False),
        ("UNIX:/tmp/ketama-golden-2.sock", 7, False),
        ("127.0.0.2:9107", 6, False),
        ("[::1]:9108", 9, False),
    ]
    l2 += collide(l2, (f"[::1]:{p}" for p in range(20000, 60000)), 1)
    # 3: a hundred servers of weight 1..3, mixed forms, two down, three
    # searched collisions.
    l3 = []
    for i in range(100):
        form = i % 4
        if form == 0:
            s = f"127.1.{i}.1:{9200 + i}"
        elif form == 1:
            s = f"[::1]:{9200 + i}"
        elif form == 2:
            s = f"cache-{'abc'[i % 3]}.ketama.test:{9200 + i}"
        else:
            s = f"unix:/tmp/ketama-golden-3-{i}.sock"
        l3.append((s, rnd.randint(1, 3), i in (17, 58)))
    # Prepended, so here the searched server is the first of each colliding
    # pair in configuration order (in list 1 it is the last).
    l3 = collide(l3, (f"127.0.0.1:{p}" for p in range(20000, 60000)), 3) + l3
    return [l1, l2, l3]


def ring(servers):
    """(hash, server) sorted, ties to the first in configuration order."""
    pts = {}
    for s, w, _ in servers:
        for h in points(s, w):
            pts.setdefault(h, s)
    return sorted(pts.items())


def uris(servers, rnd, n):
    out = [f"/{rnd.choice(['img', 'video', 'api', 'static'])}/{rnd.getrandbits(40):x}"
           f"{rnd.choice(['', '.jpg', '?q=' + str(rnd.randint(0, 999)), '/index.html'])}"
           for _ in range(n)]
    # URIs whose hash falls on the arc ending at a collided point: the tie
    # winner owns that arc, so nginx's answer records its tie rule.
    counts = {}
    for s, w, _ in servers:
        for h in points(s, w):
            counts[h] = counts.get(h, 0) + 1
    r = ring(servers)
    hashes = [h for h, _ in r]
    for idx, (h, _) in enumerate(r):
        if counts[h] < 2:
            continue
        lo = hashes[idx - 1] if idx > 0 else hashes[-1]
        found = 0
        for t in range(10_000_000):
            u = f"/collide/{h:08x}/{t}"
            k = zlib.crc32(u.encode())
            inside = lo < k <= h if idx > 0 else (k <= h or k > lo)
            if inside:
                out.append(u)
                found += 1
                if found == 3:
                    break
    return out


def add_hosts():
    with open("/etc/hosts") as f:
        text = f.read()
    extra = "".join(f"{ip} {name}\n" for name, ip in HOSTS.items() if name not in text)
    if extra:
        with open("/etc/hosts", "a") as f:
            f.write(extra)
    for name, ip in HOSTS.items():
        got = {a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET)}
        assert got == {ip}, f"{name} resolves to {got}, want only {ip}"


def run_nginx(servers, reqs, work):
    lines = []
    for s, w, down in servers:
        lines.append(f"    server {s} weight={w} max_fails=0{' down' if down else ''};")
    conf = f"""
user root;
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log error;
events {{ worker_connections 256; }}
http {{
    access_log off;
    log_format golden '$request_uri,$upstream_addr';
    upstream backend {{
        hash $request_uri consistent;
{chr(10).join(lines)}
    }}
    server {{
        listen 127.0.0.1:{LISTEN};
        keepalive_requests 1000000;
        access_log {work}/golden.log golden;
        location / {{
            proxy_pass http://backend;
            proxy_next_upstream off;
            proxy_connect_timeout 1s;
        }}
    }}
}}
"""
    with open(f"{work}/nginx.conf", "w") as f:
        f.write(conf)
    proc = subprocess.Popen(["nginx", "-p", work, "-c", f"{work}/nginx.conf"])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", LISTEN), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        conn = socket.create_connection(("127.0.0.1", LISTEN))
        f = conn.makefile("rb")
        for u in reqs:
            conn.sendall(f"GET {u} HTTP/1.1\r\nHost: golden\r\n\r\n".encode())
            length = 0
            status = f.readline()
            assert status.startswith(b"HTTP/1.1 502"), status
            while True:
                h = f.readline()
                if h in (b"\r\n", b""):
                    break
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            f.read(length)
        conn.close()
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGQUIT)
        proc.wait(timeout=10)
    with open(f"{work}/golden.log") as f:
        return [line.rstrip("\n").rsplit(",", 1) for line in f]


def addr_key(server):
    """How $upstream_addr names a server: its unix path or its port."""
    if server[:5].lower() == "unix:":
        return "unix:" + server[5:]
    m = re.search(r":(\d+)$", server)
    return m.group(1) if m else "80"


def main():
    if shutil.which("nginx") is None:
        sys.exit("nginx not found: apt-get install nginx")
    add_hosts()
    rnd = random.Random(7)
    for n, servers in enumerate(lists(), start=1):
        by_key = {}
        for s, _, _ in servers:
            k = addr_key(s)
            assert k not in by_key, f"{s} and {by_key[k]} share {k}"
            by_key[k] = s
        reqs = uris(servers, rnd, 1500)
        with tempfile.TemporaryDirectory() as work:
            log = run_nginx(servers, reqs, work)
        assert len(log) == len(reqs), (len(log), len(reqs))
        with open(os.path.join(HERE, f"golden-{n}.servers"), "w") as f:
            f.write(f"# Server list {n} of the nginx golden traces; written by regen.py.\n")
            for s, w, down in servers:
                f.write(f"{s} {w}{' down' if down else ''}\n")
        with open(os.path.join(HERE, f"golden-{n}.csv"), "w") as f:
            for (uri, addr), sent in zip(log, reqs):
                assert uri == sent, (uri, sent)
                key = addr_key(addr) if addr[:5].lower() == "unix:" else addr.rsplit(":", 1)[1]
                f.write(f"{uri},{by_key[key]}\n")
        print(f"golden-{n}: {len(servers)} servers, {len(reqs)} URIs")


if __name__ == "__main__":
    main()
