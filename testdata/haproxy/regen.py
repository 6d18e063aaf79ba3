#!/usr/bin/env python3
"""Regenerates the HAProxy golden traces from a live HAProxy.

One haproxy process (Debian's `haproxy`, 2.6) with one backend per (server
list, hash function, `balance` form), every server pointing at one local
origin: HAProxy 2.6 places a server's points by its id, not its address.
A frontend picks the backend by a request header and adds the chosen
server's name to the response (`http-response set-header X-Srv
%[srv_name]`): that is the trace. One server of `hp-4` points at a closed
port with a health check; the script waits (on HAProxy's stats socket)
until HAProxy marks it down before it sends a request.

Keys are request targets: random paths of unreserved and sub-delimiter
characters, `%XX` escapes, `:` and `@`, with and without queries; and
keys placed exactly halfway between two neighbouring points of different
servers (found by meet-in-the-middle on the hash function, inverted
avalanche included), so the tie rule is recorded (sdbm, djb2 and crc32;
wt6 mixes too well to aim at).

Writes, for each list NAME: NAME.servers (a ketama servers file: weights,
id= where the configuration gives one, `down` for a disabled server and for
the one the health check takes down), and for each hash NAME.HASH.keys and
NAME.HASH.trace (HASH as ketama names it after `haproxy:`, e.g.
sdbm+avalanche; one key per line; for each key the server chosen, as
written in NAME.servers); and for each `balance` form on hp-2 (with a bare
`hash-type consistent`) hp-2.form-FORM.keys/.trace, keys there being whole
request targets (or, for hdr, the header's value).

Usage: python3 regen.py [--out DIR] [--keys N] [--seed N] [--quick]
  --quick: two lists, two hashes and two forms (the live test in CI).
Installs haproxy with apt-get when missing (as root).
"""

import argparse
import os
import random
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FUNCS = ["sdbm", "djb2", "wt6", "crc32"]
ALL_HASHES = [f + m for f in FUNCS for m in ("", "+avalanche")]
QUICK_HASHES = ["sdbm+avalanche", "crc32"]
# (name in the file, `balance` line)
FORMS = [
    ("path-only", "balance uri path-only"),
    ("whole", "balance uri whole"),
    ("depth-2", "balance uri depth 2"),
    ("len-12", "balance uri len 12"),
    ("path-only-whole-depth-3", "balance uri path-only whole depth 3"),
    ("hdr-x-key", "balance hdr(X-Key)"),
]
QUICK_FORMS = ["path-only", "hdr-x-key"]
UNRESERVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
PCHAR = UNRESERVED + "!$&'()*+,;=:@"


def ensure_tools():
    if shutil.which("haproxy") is None:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        print("installing haproxy", file=sys.stderr)
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "haproxy"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


# -- HAProxy's functions, only to aim keys at ties (the traces are HAProxy's)

M32 = 0xFFFFFFFF


def full_hash(a):
    a = (a + 0x7ed55d16 + (a << 12)) & M32
    a = (a ^ 0xc761c23c ^ (a >> 19)) & M32
    a = (a + 0x165667b1 + (a << 5)) & M32
    a = ((a + 0xd3a2646c) ^ (a << 9)) & M32
    a = (a + 0xfd7046c5 + (a << 3)) & M32
    a = (a ^ 0xb55a4f09 ^ (a >> 16)) & M32
    return (a * 3221225473) & M32


def full_hash_inv(y):
    y = (y * pow(3221225473, -1, 1 << 32)) & M32
    z = y ^ 0xb55a4f09
    a = z ^ (z >> 16)
    a = ((a - 0xfd7046c5) * pow(9, -1, 1 << 32)) & M32
    x = 0
    for i in range(32):  # (x + c) ^ (x << 9) = a, solved bit by bit
        m = (2 << i) - 1
        if (((x + 0xd3a2646c) ^ (x << 9)) ^ a) & m:
            x |= 1 << i
    a = ((x - 0x165667b1) * pow(33, -1, 1 << 32)) & M32
    z = a ^ 0xc761c23c
    a = z ^ (z >> 19)
    return ((a - 0x7ed55d16) * pow(4097, -1, 1 << 32)) & M32


assert all(full_hash_inv(full_hash(x)) == x for x in (0, 1, 12345, 0xdeadbeef, M32))


def point_hash(sid, j):
    return full_hash((sid * 4096 + j) & M32)


CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ (0xEDB88320 if _c & 1 else 0)
    CRC_TABLE.append(_c)


def crc_reg(reg, data):
    for b in data:
        reg = (reg >> 8) ^ CRC_TABLE[(reg ^ b) & 0xFF]
    return reg


def mul_hash(init, mult, data):
    h = init
    for b in data:
        h = (h * mult + b) & M32
    return h


def tie_key(func, target, rng, tables):
    """A request target without `?` whose function hash is `target`."""
    k = 3
    if func not in tables:
        suffixes = {}
        for a in UNRESERVED:
            for b in UNRESERVED:
                for c in UNRESERVED:
                    s = (a + b + c).encode()
                    if func == "crc32":
                        v = crc_reg(0, s)
                    elif func == "sdbm":
                        v = mul_hash(0, 65599, s)
                    else:
                        v = mul_hash(0, 33, s)
                    suffixes.setdefault(v, s)
        tables[func] = suffixes
    suffixes = tables[func]
    for _ in range(2_000_000):
        prefix = ("/tie/" + "".join(rng.choice(UNRESERVED) for _ in range(6))).encode()
        if func == "crc32":
            v = crc_reg(crc_reg(M32, prefix), bytes(k))
            need = (~target & M32) ^ v
        elif func == "sdbm":
            need = (target - mul_hash(0, 65599, prefix) * pow(65599, k, 1 << 32)) & M32
        else:
            need = (target - mul_hash(5381, 33, prefix) * pow(33, k, 1 << 32)) & M32
        s = suffixes.get(need)
        if s is not None:
            return (prefix + s).decode()
    return None


def hash_of(func, data):
    if func == "crc32":
        return crc_reg(M32, data) ^ M32
    if func == "sdbm":
        return mul_hash(0, 65599, data)
    if func == "djb2":
        return mul_hash(5381, 33, data)
    raise ValueError(func)


# -- the lists


def resolve_ids(explicit):
    used = {i for i in explicit if i}
    out, nxt = [], 1
    for i in explicit:
        if i:
            out.append(i)
        else:
            while nxt in used:
                nxt += 1
            used.add(nxt)
            out.append(nxt)
        nxt += 1
    return out


def lists(rng, quick):
    """name -> list of dicts (weight, id or None, state: up/disabled/checked)."""
    def plain(n, wmax):
        return [dict(weight=rng.randint(1, wmax), id=None, state="up") for _ in range(n)]
    out = {}
    out["hp-1"] = plain(5, 3)
    hp2 = plain(20, 256)
    hp2[0]["weight"] = 256
    hp2[1]["weight"] = 1
    hp2[4]["weight"] = 0
    hp2[3]["id"] = 7
    hp2[10]["id"] = 2
    hp2[11]["id"] = 25
    out["hp-2"] = hp2
    if not quick:
        hp3 = plain(50, 40)
        hp3[5]["state"] = "disabled"
        hp3[20]["id"] = 1000
        hp3[21]["id"] = 50000
        hp3[30]["id"] = 3
        out["hp-3"] = hp3
        hp4 = plain(200, 20)
        hp4[17]["state"] = "checked"
        hp4[150]["state"] = "disabled"
        hp4[100]["id"] = 9
        out["hp-4"] = hp4
        hp5 = plain(12, 10)
        for i, s in enumerate(hp5):
            s["id"] = 100 - i * 7
        out["hp-5"] = hp5
    return out


def server_name(i):
    return "10.0.%d.%d:80" % (i // 250, i % 250)


def random_target(rng):
    segs = []
    for _ in range(rng.randint(1, 5)):
        seg = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.08:
                seg.append("%%%02X" % rng.randint(0, 255))
            else:
                seg.append(rng.choice(PCHAR))
        segs.append("".join(seg))
    t = "/" + "/".join(segs)
    if rng.random() < 0.4:
        t += "?" + "&".join(
            "".join(rng.choice(UNRESERVED) for _ in range(rng.randint(1, 6))) + "=" +
            "".join(rng.choice(PCHAR + "/?") for _ in range(rng.randint(0, 8)))
            for _ in range(rng.randint(1, 3)))
    return t


def ties(servers, func, avalanche, rng, tables, count):
    ids = resolve_ids([s["id"] for s in servers])
    pts = sorted((point_hash(ids[i], j), i)
                 for i, s in enumerate(servers) if s["state"] == "up"
                 for j in range(s["weight"] * 16))
    pairs = [(a, b) for (a, sa), (b, sb) in zip(pts, pts[1:])
             if sa != sb and (b - a) % 2 == 0 and b - a > 2]
    rng.shuffle(pairs)
    out = []
    for a, b in pairs[:count]:
        t = (a + b) // 2
        pre = full_hash_inv(t) if avalanche else t
        key = tie_key(func, pre, rng, tables)
        if key is None:
            continue
        assert hash_of(func, key.encode()) == pre
        out.append(key)
    return out


# -- the live HAProxy


class Origin(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class OriginHandler(socketserver.BaseRequestHandler):
    def handle(self):
        buf = b""
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\r\n\r\n" in buf:
                _, buf = buf.split(b"\r\n\r\n", 1)
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def backend_block(name, servers, hash_type, balance, origin):
    ids = [s["id"] for s in servers]
    lines = ["backend %s" % name, "  %s" % balance, "  hash-type %s" % hash_type]
    for i, s in enumerate(servers):
        addr = "127.0.0.1:%d" % origin
        extra = ""
        if ids[i]:
            extra += " id %d" % ids[i]
        if s["state"] == "disabled":
            extra += " disabled"
        if s["state"] == "checked":
            addr = "127.0.0.1:%d" % free_port()  # nothing listens there
            extra += " check inter 100ms fall 1 rise 1000"
        lines.append("  server s%d %s weight %d%s" % (i, addr, s["weight"], extra))
    return "\n".join(lines) + "\n"


def hash_type(h):
    if h is None:
        return "consistent"
    func, _, mod = h.partition("+")
    return "consistent %s%s" % (func, " avalanche" if mod else "")


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def ask(self, backend, target, header=None):
        host = "golden.test"
        if target.startswith("http://"):
            host = target[7:].split("/", 1)[0]  # HAProxy wants Host to match it
        req = "GET %s HTTP/1.1\r\nHost: %s\r\nX-Be: %s\r\n" % (target, host, backend)
        if header is not None:
            req += "X-Key: %s\r\n" % header
        self.sock.sendall((req + "\r\n").encode())
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("haproxy closed the connection on %r" % target)
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 200 " not in lines[0] + " ":
            raise RuntimeError("haproxy answered %r to %r (backend %s)" % (lines[0], target, backend))
        for l in lines[1:]:
            k, _, v = l.partition(":")
            if k.lower() == "x-srv":
                return int(v.strip()[1:])
        raise RuntimeError("no X-Srv in %r" % head)


def stats(sock_path, cmd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall((cmd + "\n").encode())
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    return out.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--ties", type=int, default=12)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    ensure_tools()
    rng = random.Random(args.seed)
    all_lists = lists(rng, args.quick)
    hashes = QUICK_HASHES if args.quick else ALL_HASHES
    forms = [f for f in FORMS if not args.quick or f[0] in QUICK_FORMS]

    origin = Origin(("127.0.0.1", 0), OriginHandler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    oport = origin.server_address[1]
    work = tempfile.mkdtemp(prefix="haproxy-golden-")
    sock_path = os.path.join(work, "stats.sock")
    port = free_port()
    cfg = ["global", "  maxconn 2000", "  stats socket %s level admin" % sock_path,
           "defaults", "  mode http", "  timeout connect 2s", "  timeout client 30s",
           "  timeout server 30s", "",
           "frontend fe", "  bind 127.0.0.1:%d" % port,
           "  use_backend %[req.hdr(x-be)]",
           "  http-response set-header X-Srv %[srv_name]", ""]
    plan = []  # (backend, list, hash or form, keys, header?)
    tables = {}
    for lname, servers in all_lists.items():
        for h in hashes:
            be = "b_%s_%s" % (lname.replace("-", ""), h.replace("+", "_"))
            cfg.append(backend_block(be, servers, hash_type(h), "balance uri", oport))
            keys = [random_target(rng) for _ in range(args.keys)]
            func, _, mod = h.partition("+")
            if func != "wt6":
                keys += ties(servers, func, bool(mod), rng, tables, args.ties)
            plan.append((be, lname, h, keys, False))
    for fname, balance in forms:
        be = "b_form_%s" % fname.replace("-", "_")
        cfg.append(backend_block(be, all_lists["hp-2"], "consistent", balance, oport))
        if fname.startswith("hdr"):
            # A first element HAProxy hashes (a leading comma would leave
            # it empty, and HAProxy would fall back to round robin).
            keys = [rng.choice(UNRESERVED) + "".join(rng.choice(PCHAR + " ") for _ in range(rng.randint(0, 30)))
                    for _ in range(args.keys)]
        else:
            keys = []
            for _ in range(args.keys):
                t = random_target(rng)
                if rng.random() < 0.3:
                    t = "http://h%d.example%s" % (rng.randint(0, 9), t)
                keys.append(t)
        plan.append((be, "hp-2", "form-" + fname, keys, fname.startswith("hdr")))
    conf = os.path.join(work, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write("\n".join(cfg))
    proc = subprocess.Popen(["haproxy", "-f", conf, "-db"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError("haproxy exited: %s" % proc.stderr.read().decode())
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                if os.path.exists(sock_path):
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("haproxy did not start")
            time.sleep(0.05)
        checked = [(l, i) for l, ss in all_lists.items() for i, s in enumerate(ss)
                   if s["state"] == "checked"]
        while checked:
            rows = stats(sock_path, "show stat").splitlines()
            down = {(r.split(",")[0], r.split(",")[1]) for r in rows[1:]
                    if "," in r and r.split(",")[17].startswith("DOWN")}
            want = {(be, "s%d" % i) for be, l, *_ in plan for (cl, i) in checked if cl == l}
            if want <= down:
                break
            if time.time() > deadline:
                raise RuntimeError("health checks did not take %s down" % sorted(want - down))
            time.sleep(0.05)
        version = subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.split("\n")[0]
        client = Client(port)
        os.makedirs(args.out, exist_ok=True)
        for lname, servers in all_lists.items():
            with open(os.path.join(args.out, lname + ".servers"), "w") as f:
                f.write("# %s, recorded from %s\n" % (lname, version))
                for i, s in enumerate(servers):
                    line = "%s %d" % (server_name(i), s["weight"])
                    if s["id"]:
                        line += " id=%d" % s["id"]
                    if s["state"] != "up":
                        line += " down  # %s" % ("disabled" if s["state"] == "disabled" else "down by its health check")
                    f.write(line + "\n")
        for be, lname, what, keys, is_hdr in plan:
            got = [client.ask(be, "/" if is_hdr else k, k if is_hdr else None) for k in keys]
            with open(os.path.join(args.out, "%s.%s.keys" % (lname, what)), "w") as f:
                f.write("".join(k + "\n" for k in keys))
            with open(os.path.join(args.out, "%s.%s.trace" % (lname, what)), "w") as f:
                f.write("".join(server_name(i) + "\n" for i in got))
        print("recorded %d traces from %s" % (len(plan), version), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
