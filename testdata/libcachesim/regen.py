#!/usr/bin/env python3
"""Regenerates the libCacheSim golden data for `ketama migrate-plan --simulate`.

libCacheSim (the Python package `libcachesim`) replays every server's
request stream through its own LRU caches, one per server, of the same
size as ketama's. The streams are cut from each trace exactly as the
simulator documents it (docs/migrations.md): the first WARMUP requests go
to their old-ring owner and are not counted; then each step serves the
next REQUESTS_PER_STEP requests at its share, the last step the rest.
Which server a request goes to at a step's share, and which server owned
it on the old ring, is asked of the project's own router tooling
(`ketama route`, which the nginx/HAProxy/libmemcached golden data check);
everything else, the traces, the cutting and the caches, is done here.

With fill from the previous owner, a miss at a moved key's new owner
looks in the old owner's cache with `find(req, update_cache=False)` (no
promotion): found, it is a peer fill, else an origin fetch.

Usage (from the repository's root):
    python3 -m pip install libcachesim      # 0.3.5 when last regenerated
    cargo build -p ketama-cli
    python3 testdata/libcachesim/regen.py [path/to/ketama]
"""

import gzip
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import libcachesim as lcs

HERE = os.path.dirname(os.path.abspath(__file__))
KETAMA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "target", "debug", "ketama")

OBJECTS = 5000
REQUESTS = 60000
WARMUP = 20000
STEPS = [100, 5000, 10000]
REQUESTS_PER_STEP = 10000
TRACES = [("zipf-0.6", 0.6, 6), ("zipf-0.9", 0.9, 9), ("zipf-1.2", 1.2, 12)]
CACHE_SIZES = [100, 600]
# The old ring: four servers of unequal weight, nginx's 160 points per
# weight unit; the new one adds a fifth and keeps 40.
OLD = ["10.2.0.1:80 1", "10.2.0.2:80 2", "10.2.0.3:80 1", "10.2.0.4:80 1"]
NEW = OLD + ["10.2.0.5:80 1"]
NEW_POINT_MULTIPLE = "40"


def write(name, text):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(text)


def zipf_trace(alpha, seed):
    cum, acc = [], 0.0
    for k in range(1, OBJECTS + 1):
        acc += k ** -alpha
        cum.append(acc)
    rng = random.Random(seed)
    return [f"o{r}" for r in rng.choices(range(OBJECTS), cum_weights=cum, k=REQUESTS)]


def route(keys, *args):
    """`ketama route` over keys: the first column of each answer line."""
    out = subprocess.run(
        [KETAMA, "route", *args],
        input="".join(k + "\n" for k in keys).encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    lines = out.splitlines()
    assert len(lines) == len(keys), (len(lines), len(keys))
    return [l.split("\t") for l in lines]


def replay(keys, old_owner, served, cache_size, fill):
    """served[i] = (step, server, ring) for counted requests."""
    servers = sorted({s for s in old_owner} | {s for _, s, _ in served})
    caches = {s: lcs.LRU(cache_size) for s in servers}
    req = lambda k: lcs.Request(obj_id=int(k.lstrip("o")), obj_size=1)
    for i in range(WARMUP):
        caches[old_owner[i]].get(req(keys[i]))
    steps = [
        {"bp": bp, "requests": 0, "hits_by_ring": {"old": 0, "new": 0},
         "misses_by_ring": {"old": 0, "new": 0}, "peer_fills": 0, "origin_fetches": 0}
        for bp in STEPS
    ]
    per_server = {s: {"server": s, "hits": 0, "misses": 0} for s in servers}
    for i, (step, server, ring) in enumerate(served, start=WARMUP):
        st = steps[step]
        st["requests"] += 1
        r = req(keys[i])
        if caches[server].get(r):
            st["hits_by_ring"][ring] += 1
            per_server[server]["hits"] += 1
            continue
        st["misses_by_ring"][ring] += 1
        per_server[server]["misses"] += 1
        prev = old_owner[i]
        if fill and ring == "new" and prev != server and caches[prev].find(r, False) is not None:
            st["peer_fills"] += 1
        else:
            st["origin_fetches"] += 1
    for st in steps:
        st["hits"] = sum(st["hits_by_ring"].values())
        st["misses"] = sum(st["misses_by_ring"].values())
    return {"steps": steps, "servers": [per_server[s] for s in servers]}


def golden_of(name, trace_file, keys, old_file, new_file, extra_args, label, zipf=0.9):
    """Routes keys through the schedule and writes one golden per cache size."""
    old_owner = [r[0] for r in route(keys, "--servers", old_file)]
    served = []
    for step, bp in enumerate(STEPS):
        lo = WARMUP + step * REQUESTS_PER_STEP
        hi = len(keys) if step == len(STEPS) - 1 else lo + REQUESTS_PER_STEP
        answers = route(keys[lo:hi], "--servers", old_file, "--to", new_file,
                        "--to-point-multiple", NEW_POINT_MULTIPLE, "--rollout", str(bp))
        served += [(step, server, ring) for server, ring in answers]
    for size in CACHE_SIZES:
        golden = {
            "generated_by": f"libcachesim {getattr(lcs, '__version__', '?')} LRU, testdata/libcachesim/regen.py",
            "trace": trace_file,
            "zipf": zipf,
            "read_by": label,
            "args": extra_args + ["--to-point-multiple", NEW_POINT_MULTIPLE, "--warmup", str(WARMUP),
                     "--steps", ",".join(map(str, STEPS)),
                     "--requests-per-step", str(REQUESTS_PER_STEP),
                     "--cache-objects", str(size)],
            "without_fill": replay(keys, old_owner, served, size, False),
            "with_fill": replay(keys, old_owner, served, size, True),
        }
        write(f"{name}.c{size}.json", json.dumps(golden, indent=1) + "\n")
        print(name, size, [s["origin_fetches"] for s in golden["with_fill"]["steps"]])


def published_formats(keys, old_file, new_file):
    """The zipf-0.9 trace as a gzipped csv and a zstd-compressed
    oracleGeneral file (numeric object ids, sizes drawn here), each read
    back by libCacheSim's own TraceReader from an uncompressed copy: the
    keys ketama must see are the ids libCacheSim reads, in decimal."""
    rng = random.Random(99)
    ids = [int(k[1:]) for k in keys]
    size_of = {i: rng.randint(1, 1 << 20) for i in set(ids)}
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = os.path.join(tmp, "t.csv")
        with open(csv_path, "w") as f:
            f.write("timestamp,obj_id,obj_size\n")
            for t, i in enumerate(ids):
                f.write(f"{t + 1},{i},{size_of[i]}\n")
        with open(csv_path, "rb") as src:
            data = src.read()
        with open(os.path.join(HERE, "zipf-0.9.csv.gz"), "wb") as f:
            f.write(gzip.compress(data, mtime=0))
        p = lcs.ReaderInitParam(has_header=True, has_header_set=True, delimiter=",",
                                obj_id_is_num=True, obj_id_is_num_set=True)
        p.time_field, p.obj_id_field, p.obj_size_field = 1, 2, 3
        csv_keys = [str(r.obj_id) for r in lcs.TraceReader(csv_path, lcs.TraceType.CSV_TRACE, p)]
        bin_path = os.path.join(tmp, "t.oracleGeneral")
        with open(bin_path, "wb") as f:
            for t, i in enumerate(ids):
                f.write(struct.pack("<IQIq", t + 1, i, size_of[i], -1))
        out = os.path.join(HERE, "zipf-0.9.oracleGeneral.zst")
        subprocess.run(["zstd", "-q", "-f", "-19", bin_path, "-o", out], check=True)
        bin_keys = [str(r.obj_id) for r in lcs.TraceReader(bin_path, lcs.TraceType.ORACLE_GENERAL_TRACE)]
    assert csv_keys == bin_keys == [str(i) for i in ids], "libCacheSim read other ids"
    golden_of("zipf-0.9-csv", "zipf-0.9.csv.gz", csv_keys, old_file, new_file,
              ["--trace-format", "csv", "--csv-header", "--csv-time-col", "1",
               "--csv-key-col", "2", "--csv-size-col", "3"],
              "libcachesim TraceReader CSV_TRACE (has_header, time 1, obj_id 2, obj_size 3)")
    golden_of("zipf-0.9-oracleGeneral", "zipf-0.9.oracleGeneral.zst", bin_keys, old_file, new_file,
              ["--trace-format", "oracleGeneral"],
              "libcachesim TraceReader ORACLE_GENERAL_TRACE")


def main():
    write("old.servers", "".join(l + "\n" for l in OLD))
    write("new.servers", "".join(l + "\n" for l in NEW))
    old_file, new_file = os.path.join(HERE, "old.servers"), os.path.join(HERE, "new.servers")
    for name, alpha, seed in TRACES:
        keys = zipf_trace(alpha, seed)
        write(f"{name}.trace", "".join(k + "\n" for k in keys))
        golden_of(name, f"{name}.trace", keys, old_file, new_file, [], "one key per line",
                  zipf=alpha)
        if name == "zipf-0.9":
            published_formats(keys, old_file, new_file)


if __name__ == "__main__":
    main()
