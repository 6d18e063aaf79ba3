#!/usr/bin/env python3
"""Regenerates the memcached golden traces from the real programs.

- libmemcached: libmemcached_trace.c, built here against Debian's
  libmemcached-dev, asks memcached_generate_hash (KETAMA_WEIGHTED) for each
  key's server. No server is contacted.
- twemproxy: a live nutcracker (`distribution: ketama`, one run per key hash)
  in front of one memcached per server, each on its own loopback address
  other than 127.0.0.1 (where a packaged memcached may listen). Every key is
  SET through nutcracker, then looked for on every memcached: the one that
  holds it is the server twemproxy chose.

Writes, for each list NAME: NAME.servers (a ketama servers file), NAME.keys
(one key per line, hex: keys hold bytes >= 0x80 to catch sign extension),
and NAME.SCHEME.trace (SCHEME: libmemcached or twemproxy-HASH; the server chosen for each key,
  one per line, as
written in NAME.servers). Deterministic for given program versions.

Usage: python3 regen.py [--out DIR] [--keys N] [--quick]
  --quick: one small list per program and 3 key hashes (used by the live
  test in CI); default: every list and all 12 twemproxy key hashes.
Installs nutcracker, memcached, libmemcached-dev and gcc with apt-get when
missing (as root).
"""

import argparse
import hashlib
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_HASHES = ["md5", "fnv1a_64", "crc32a", "murmur", "one_at_a_time", "fnv1_64",
              "fnv1a_32", "fnv1_32", "crc16", "crc32", "hsieh", "jenkins"]
QUICK_HASHES = ["md5", "fnv1a_64", "murmur"]


def ensure_tools():
    need = []
    for cmd, pkg in [("nutcracker", "nutcracker"), ("memcached", "memcached"), ("gcc", "gcc")]:
        if shutil.which(cmd) is None:
            need.append(pkg)
    if not os.path.exists("/usr/include/libmemcached/memcached.h"):
        need.append("libmemcached-dev")
    if need:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        print("installing " + " ".join(need), file=sys.stderr)
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + need, check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def point_counts(weights):
    """Points per server, in single-precision float as both programs do."""
    live = sum(1 for w in weights if w > 0)
    total = sum(weights)
    out = []
    for w in weights:
        pct = f32(f32(w) / f32(total))
        v = f32(f32(f32(pct * 160.0) / 4.0) * f32(live))
        out.append(int(v // 1) * 4)
    return out


def points_of(name, count):
    out = []
    for i in range(count // 4):
        out.extend(struct.unpack("<4I", hashlib.md5(b"%s-%d" % (name, i)).digest()))
    return out


def md5_key(k):
    return struct.unpack("<I", hashlib.md5(k).digest()[:4])[0]


def fnv1a_64_key(k):
    h = 0x84222325
    for b in k:
        h ^= b if b < 0x80 else (b | 0xFFFFFF00)  # C's signed char
        h = (h * 0x1b3) & 0xFFFFFFFF
    return h


KEY_BYTES = bytes(range(0x21, 0x7f)) + bytes(range(0x80, 0x100))


def random_key(rng, longest=40):
    return bytes(rng.choice(KEY_BYTES) for _ in range(rng.randint(1, longest)))


def gap_keys(rng, points, value, key_hash, n):
    """Keys whose hash lands in the arc that ends at `value` (a collided
    point), so the trace records which server wins the tie."""
    below = max((p for p in points if p < value), default=None)
    lo = below + 1 if below is not None else 0
    keys = []
    while len(keys) < n:
        k = random_key(rng)
        if lo <= key_hash(k) <= value:
            keys.append(k)
    return keys


def find_collision(rng, names, counts, candidate, count):
    """A name (candidate % i) whose points hit another server's point."""
    taken = {}
    for name, c in zip(names, counts):
        for p in points_of(name, c):
            taken.setdefault(p, name)
    i = 0
    while True:
        name = candidate % i
        for p in points_of(name, count):
            if p in taken:
                return name, p
        i += 1


# ---------------------------------------------------------------- libmemcached

def libmemcached_lists(rng, quick):
    """(list name, [(server string, host, port, weight)]) ."""
    lists = []

    def ipv4_list(n, name):
        servers = []
        for i in range(n):
            host = "10.%d.%d.%d" % (rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254))
            port = rng.choice([11211, 11211, 11212, 21211, 11311])
            w = rng.randint(1, 10)
            s = host if port == 11211 and rng.random() < 0.5 else "%s:%d" % (host, port)
            servers.append((s, host, port, w))
        lists.append((name, servers))

    ipv4_list(7, "lm-1")
    if quick:
        return lists
    ipv4_list(25, "lm-2")
    ipv4_list(50, "lm-3")
    # Host names, IPv6 in brackets, a unix socket; equal weights.
    servers = [("cache-%02d.example:11211" % i, "cache-%02d.example" % i, 11211, 1) for i in range(6)]
    servers += [("[2001:db8::%x]:11212" % i, "2001:db8::%x" % i, 11212, 2) for i in range(1, 4)]
    servers.append(("/run/memcached/mc.sock", "/run/memcached/mc.sock", 0, 3))
    lists.append(("lm-4", servers))
    # 25 equal weights: single-precision float gives each server 156
    # points where exact arithmetic gives 160. A searched server whose point
    # collides with another's is listed first, with a longer name that
    # sorts after the other's: libmemcached's tie winner is the first in
    # configuration order (by name it would be the other).
    base = [("cache-%02d.example" % i, "cache-%02d.example" % i, 11211, 1) for i in range(24)]
    counts = point_counts([1] * 25)
    assert counts[0] == 156
    hit, value = find_collision(rng, [b[1].encode() for b in base], counts[1:],
                                b"tie-%d.long.example", counts[0])
    name = hit.decode()
    lists.append(("lm-5", [(name, name, 11211, 1)] + base))
    # 29 equal weights: float gives 160 points where double would give 156.
    ipv4_list(29, "lm-6")
    lists[-1] = ("lm-6", [(s, h, p, 1) for s, h, p, _ in lists[-1][1]])
    return lists


def run_libmemcached(lists, out, nkeys, rng, tmp):
    exe = os.path.join(tmp, "libmemcached_trace")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "libmemcached_trace.c"),
                    "-lmemcached"], check=True)
    for name, servers in lists:
        keys = [random_key(rng, 80) for _ in range(nkeys)]
        if name == "lm-5":
            counts = point_counts([s[3] for s in servers])
            pts = []
            for (_, host, port, _), c in zip(servers, counts):
                pts.extend(points_of(host.encode(), c))
            first = set(points_of(servers[0][1].encode(), counts[0]))
            value = next(p for p in pts[counts[0]:] if p in first)
            keys += gap_keys(rng, pts, value, md5_key, 30)
        stdin = "%d\n" % len(servers)
        stdin += "".join("%s %d %d\n" % (h, p, w) for _, h, p, w in servers)
        stdin += "".join(k.hex() + "\n" for k in keys)
        res = subprocess.run([exe], input=stdin.encode(), capture_output=True, check=True)
        chosen = [servers[int(x)][0] for x in res.stdout.split()]
        assert len(chosen) == len(keys)
        write_list(out, name, [(s, w, None) for s, _, _, w in servers], keys,
                   {"libmemcached": chosen})


# ------------------------------------------------------------------ twemproxy

class Memcached:
    def __init__(self, host, port, tmp):
        self.host, self.port = host, port
        self.proc = subprocess.Popen(["memcached", "-l", host, "-p", str(port), "-U", "0",
                                      "-m", "16", "-t", "1", "-u", "nobody"] if os.geteuid() == 0
                                     else ["memcached", "-l", host, "-p", str(port), "-U", "0",
                                           "-m", "16", "-t", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.sock = connect(host, port, self.proc, "memcached")

    def command(self, line, until):
        self.sock.sendall(line)
        return read_until(self.sock, until)

    def holding(self, keys):
        found = set()
        for i in range(0, len(keys), 50):
            batch = keys[i:i + 50]
            reply = self.command(b"get " + b" ".join(batch) + b"\r\n", b"END\r\n")
            for line in reply.split(b"\r\n"):
                if line.startswith(b"VALUE "):
                    found.add(line.split(b" ")[1])
        return found

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def connect(host, port, proc, what):
    deadline = time.time() + 10
    while True:
        if proc.poll() is not None:
            raise SystemExit("%s on %s:%d exited: %s" % (what, host, port,
                                                          proc.stderr.read().decode(errors="replace")))
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError:
            if time.time() > deadline:
                raise SystemExit("%s on %s:%d did not start listening" % (what, host, port))
            time.sleep(0.02)


def read_until(sock, end):
    buf = b""
    while not buf.endswith(end):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed after %r" % buf[-200:])
        buf += chunk
    return buf


def twemproxy_lists(rng, quick):
    """(list name, [(server string, weight, name or None, (host, port))])."""
    addrs = [("127.0.0.%d" % (2 + i // 2), 11211 if i % 2 == 0 else 11212) for i in range(32)]
    rng.shuffle(addrs)
    lists = []

    def mixed(n, name, named_share):
        servers = []
        for i, (host, port) in enumerate(addrs[:n]):
            w = rng.randint(1, 10)
            nm = "cache-%s" % "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6))) \
                if rng.random() < named_share else None
            s = host if port == 11211 and rng.random() < 0.5 else "%s:%d" % (host, port)
            servers.append((s, w, nm, (host, port)))
        names = [x[2] for x in servers if x[2]]
        assert len(names) == len(set(names)), "regenerate with another seed: duplicate name"
        lists.append((name, servers))

    mixed(5, "tw-1", 0.0)
    if quick:
        return lists
    mixed(12, "tw-2", 0.5)
    # 29 named servers, equal weights (float gives 160 points each, double
    # would give 156); the searched one collides with another's point, comes
    # first in the file and is longer but smaller byte by byte: twemproxy's
    # tie winner is the first by length then bytes (the other server).
    base_names = ["zz%02d" % i for i in range(28)]
    counts = point_counts([1] * 29)
    hit, _ = find_collision(rng, [n.encode() for n in base_names], counts[1:], b"a%05d", counts[0])
    named = [hit.decode()] + base_names
    servers = []
    for nm, (host, port) in zip(named, addrs):
        servers.append(("%s:%d" % (host, port), 1, nm, (host, port)))
    lists.append(("tw-3", servers))
    return lists


def run_twemproxy(lists, out, nkeys, rng, tmp, hashes):
    needed = sorted({s[3] for _, servers in lists for s in servers})
    mcs = {}
    try:
        for host, port in needed:
            mcs[(host, port)] = Memcached(host, port, tmp)
        for name, servers in lists:
            keys = [random_key(rng) for _ in range(nkeys)]
            if name == "tw-3":
                counts = point_counts([s[1] for s in servers])
                pts = []
                for s, c in zip(servers, counts):
                    pts.extend(points_of(s[2].encode(), c))
                first = set(points_of(servers[0][2].encode(), counts[0]))
                value = next(p for p in pts[counts[0]:] if p in first)
                keys += gap_keys(rng, pts, value, md5_key, 20)
                keys += gap_keys(rng, pts, value, fnv1a_64_key, 20)
            traces = {}
            for h in hashes:
                traces["twemproxy-" + h] = twemproxy_trace(servers, keys, h, mcs, tmp)
                print("%s %s: %d keys" % (name, h, len(keys)), file=sys.stderr)
            write_list(out, name, [(s, w, nm) for s, w, nm, _ in servers], keys, traces)
    finally:
        for m in mcs.values():
            m.stop()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def twemproxy_trace(servers, keys, key_hash, mcs, tmp):
    for m in mcs.values():
        m.command(b"flush_all\r\n", b"OK\r\n")
    port, stats = free_port(), free_port()
    conf = os.path.join(tmp, "nutcracker.yml")
    with open(conf, "w") as f:
        f.write("pool:\n  listen: 127.0.0.1:%d\n  hash: %s\n  distribution: ketama\n"
                "  auto_eject_hosts: false\n  timeout: 5000\n  servers:\n" % (port, key_hash))
        for _, w, nm, (host, p) in servers:
            f.write("   - %s:%d:%d%s\n" % (host, p, w, " " + nm if nm else ""))
    proc = subprocess.Popen(["nutcracker", "-c", conf, "-s", str(stats), "-a", "127.0.0.1",
                             "-o", os.path.join(tmp, "nutcracker.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sock = connect("127.0.0.1", port, proc, "nutcracker")
        for i in range(0, len(keys), 100):
            batch = keys[i:i + 100]
            sock.sendall(b"".join(b"set " + k + b" 0 0 1\r\nx\r\n" for k in batch))
            reply = b""
            while reply.count(b"\r\n") < len(batch):
                chunk = sock.recv(65536)
                if not chunk:
                    raise SystemExit("nutcracker closed the connection")
                reply += chunk
            if reply != b"STORED\r\n" * len(batch):
                raise SystemExit("nutcracker answered %r" % reply[:200])
        sock.close()
    finally:
        proc.kill()
        proc.wait()
    holder = {}
    by_addr = {s[3]: s[0] for s in servers}
    for addr, server in by_addr.items():
        for k in mcs[addr].holding(keys):
            if k in holder:
                raise SystemExit("key %r on two servers" % k)
            holder[k] = server
    missing = [k for k in keys if k not in holder]
    if missing:
        raise SystemExit("%d keys on no server, e.g. %r" % (len(missing), missing[0]))
    return [holder[k] for k in keys]


def write_list(out, name, servers, keys, traces):
    with open(os.path.join(out, name + ".servers"), "w") as f:
        for s, w, nm in servers:
            f.write("%s %d%s\n" % (s, w, " name=" + nm if nm else ""))
    with open(os.path.join(out, name + ".keys"), "w") as f:
        f.write("".join(k.hex() + "\n" for k in keys))
    for scheme, chosen in traces.items():
        with open(os.path.join(out, "%s.%s.trace" % (name, scheme)), "w") as f:
            f.write("".join(c + "\n" for c in chosen))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--keys", type=int, default=3000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=16)
    a = ap.parse_args()
    ensure_tools()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        run_libmemcached(libmemcached_lists(rng, a.quick), a.out, a.keys, rng, tmp)
        run_twemproxy(twemproxy_lists(rng, a.quick), a.out, a.keys, rng, tmp,
                      QUICK_HASHES if a.quick else ALL_HASHES)


if __name__ == "__main__":
    main()
