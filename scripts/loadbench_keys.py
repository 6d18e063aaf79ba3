"""The `keys` section of scripts/loadbench.sh: what a routing key form
costs the router per request, beside the default key (`$request_uri`,
`[key] source = "path_query"`), one router process per form, one worker
each, in front of the same four nginx origins, in interleaved rounds.

Per request, over `wrk -t1 -c32` runs whose requests carry a `Host`, two
`Cookie` fields and a query (so that every form finds its value): CPU
microseconds and system calls of the router's process from `perf stat -p
PID` (CPU from /proc/PID/stat where perf is missing), and the ratio of
each form's CPU to the default's, median and min-max over the rounds.
`KEY_FORMS=1,2` runs only those forms beside the default.
"""

import os
import statistics

FORMS = [
    ("path_query (default)", ""),
    ("template \"$request_uri\"", '[key]\ntemplate = "$request_uri"'),
    ("template \"$scheme://$host$uri?v=$arg_v\"", '[key]\ntemplate = "$scheme://$host$uri?v=$arg_v"'),
    ("template \"$cookie_sid\"", '[key]\ntemplate = "$cookie_sid"'),
    ("balance \"hash req.cook(sid)\"", '[key]\nbalance = "hash req.cook(sid)"'),
    ("balance \"url_param v\"", '[key]\nbalance = "url_param v"'),
    ("path_query, [key.normalize] sort_query", '[key.normalize]\nsort_query = true'),
    # A key migration at 50% (the new side sorts the query) beside a ring
    # migration at 50% (one key): what taking the second key costs.
    ("[migration.key] sort_query at 50%", '[migration]\nring = { compat = "nginx", layout = "compact", point_multiple = 40 }\nglobal_bp = 5000\n\n[migration.key.normalize]\nsort_query = true'),
    ("ring migration at 50% (one key)", '[migration]\nring = { compat = "nginx", layout = "compact", point_multiple = 40 }\nglobal_bp = 5000'),
]


def script(lb):
    path = os.path.join(lb.W, "keys.lua")
    with open(path, "w") as f:
        f.write("""local n = 0
request = function()
  n = n + 1
  local h = { ["Host"] = "cdn" .. (n % 5) .. ".example", ["Cookie"] = "lang=en; sid=s" .. (n % 9973) }
  return wrk.format("GET", "/assets/" .. (n % 100000) .. "/object.jpg?w=640&v=" .. (n % 7) .. "&fmt=webp", h)
end
""")
    return path


def keys(lb):
    import loadbench_cost
    use_perf = loadbench_cost.perf_works()
    lb.log(f"keys (perf stat: {'yes' if use_perf else 'no, /proc only'})")
    lua = script(lb)
    base = 18900
    procs = []
    # KEY_FORMS=0,2: only those forms (by index; 0, the default, always).
    pick = os.environ.get("KEY_FORMS")
    chosen = sorted({0} | {int(i) for i in pick.split(",")}) if pick else range(len(FORMS))
    for i in chosen:
        name, extra = FORMS[i]
        port = base + i
        p = lb.router(port, 1, health=False, extra=extra)[0]
        procs.append((name, port, p.pid))
    res = {name: [] for name, _, _ in procs}
    for r in range(lb.ROUNDS):
        order = procs[r % len(procs):] + procs[:r % len(procs)]
        for name, port, pid in order:
            res[name].append(loadbench_cost.counted_run(lb, port, pid, use_perf, script=lua))
        lb.log(f"  round {r + 1}/{lb.ROUNDS}")
    med = statistics.median
    ref = procs[0][0]
    print(f"### What a key form costs (wrk -t1 -c{lb.CONNS}, {lb.DUR} s runs, {lb.ROUNDS} interleaved rounds, medians; one worker each)\n")
    print("| key | requests/s | CPU us / request (min-max) | system calls | CPU / default's (min-max over rounds) |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in res.items():
        cpu = [x[1] for x in runs]
        ratios = [x[1] / y[1] for x, y in zip(runs, res[ref])]
        sc = [x[3] for x in runs if x[3] is not None]
        print(f"| {name} | {med([x[0] for x in runs]):,.0f} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) | "
              f"{med(sc):.2f} | {med(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |" if sc else
              f"| {name} | {med([x[0] for x in runs]):,.0f} | {med(cpu):.1f} | - | {med(ratios):.3f} |")
    print()
