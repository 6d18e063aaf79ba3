"""The end of scripts/loadbench.py's report: one summary table of every
section's headline figure that ran (the router's ratio beside each), and
the bodies section's chart (SVG drawn here, PNG rendered from it by
headless Chromium when it is installed). Called with the loadbench
module, whose SUMMARY the sections filled.
"""

import os
import subprocess
import time

def summary(lb):
    """One table of every section's headline figure that ran, the
    router's ratio beside each."""
    if not lb.SUMMARY:
        return
    print("### Summary (one worker each)\n")
    print("| workload | ketama-router | stock Pingora | nginx as shipped | nginx tuned | router vs stock | router vs nginx tuned |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    t = lb.SUMMARY.get("throughput")
    if t:
        r = lb.SUMMARY["throughput_ratio"]
        ng = next(k for k in t if k.startswith("nginx"))
        st = "stock Pingora, router's runtime settings, jemalloc"
        sh = "stock Pingora, jemalloc, adding the router's four headers (--headers)"
        print(f"| small responses, requests/s | {t['ketama-router (defaults)']:.0f} | {t[st]:.0f} (with the router's headers: {t[sh]:.0f}) "
              f"| {t[ng]:.0f} | - | {r[st]:.3f} (like for like: {r[sh]:.3f}) | {r[ng]:.3f} (as shipped) |")
    b = lb.SUMMARY.get("bodies")
    if b:
        p = b["procs"]
        for size in b["sizes"]:
            f = [b["figures"][(size, n)] for n in p]
            print(f"| {size}{'' if 'upload' in size else ' bodies'}, GB/s | {f[0][0]:.2f} | {f[1][0]:.2f} | {f[2][0]:.2f} | {f[3][0]:.2f} "
                  f"| {f[1][1]:.3f} | {f[3][1]:.3f} |")
    c = lb.SUMMARY.get("conns")
    if c:
        print(f"| 10,000 connections, p99 ms | {c[0][3]:.2f} | {c[1][3]:.2f} | - | {c[2][3]:.2f} (worker_connections 20000) "
              f"| {c[0][3] / c[1][3]:.2f} | {c[0][3] / c[2][3]:.2f} |")
        print(f"| 10,000 connections, KiB each | {c[0][8]:.1f} | {c[1][8]:.1f} | - | {c[2][8]:.1f} "
              f"| {c[0][8] / c[1][8]:.2f} | {c[0][8] / c[2][8]:.2f} |")
    k = lb.SUMMARY.get("cost")
    # Without stock Pingora (COST_WITHOUT_STOCK), its tables are all.
    if k and "stock Pingora (jemalloc)" in k:
        rt, st = k["ketama-router"], k["stock Pingora (jemalloc)"]
        ng = next(v for n, v in k.items() if n.startswith("nginx"))
        print(f"| small request, CPU us (counted) | {rt['cpu_us']:.1f} | {st['cpu_us']:.1f} | - | {ng['cpu_us']:.1f} "
              f"| {rt['cpu_us'] / st['cpu_us']:.2f} | {rt['cpu_vs_nginx']:.2f} |")
        if rt["syscalls"] is not None:
            print(f"| small request, system calls | {rt['syscalls']:.2f} | {st['syscalls']:.2f} | - | {ng['syscalls']:.2f} "
                  f"| {rt['syscalls'] / st['syscalls']:.2f} | {rt['syscalls'] / ng['syscalls']:.2f} |")
        idle = k["idle_kib"]
        ir, is_ = idle["ketama-router"], idle["stock Pingora (jemalloc)"]
        inn = next(v for n, v in idle.items() if n.startswith("nginx"))
        for i, n in enumerate(("2,000", "10,000")):
            print(f"| idle keep-alive connection at {n}, KiB | {ir[i]:.2f} | {is_[i]:.2f} | - | {inn[i]:.2f} "
                  f"| {ir[i] / is_[i]:.2f} | {ir[i] / inn[i]:.2f} |")
    s = lb.SUMMARY.get("scale")
    if s:
        print(f"| 10,000 backends, RSS after start MB | {s['router_rss']:.1f} | {s['stock_rss']:.1f} | - | - | {s['rss']:.2f} | - |")
        print(f"| 10,000 backends, one-backend reload ms | {s['reload_ms']:.0f} | {s['stock_update_ms']:.0f} (update()) | - | - | {s['reload']:.2f} | - |")
        print(f"| 10,000 backends, RSS 2 s after a reload / before (worst of 5) | {s['rss_2s']:.3f} | - | - | - | - | - |")
    print()


COLORS = ["#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c"]


def chart(lb, out_dir):
    """Throughput by object size, a bar per proxy: SVG drawn here, PNG
    rendered from it by headless Chromium when it is installed."""
    b = lb.SUMMARY.get("bodies")
    if not b:
        return
    sizes, procs, fig = b["sizes"], b["procs"], b["figures"]
    w, h, left, bottom, top = 820, 420, 70, 70, 50
    top_v = max(v[0] for v in fig.values()) * 1.15
    group = (w - left - 20) / len(sizes)
    bar = group * 0.8 / len(procs)
    y = lambda v: top + (h - top - bottom) * (1 - v / top_v)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="DejaVu Sans, sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">Throughput by object size, one worker each (GB/s of bodies, {time.strftime("%Y-%m-%d")})</text>']
    step = 0.5 if top_v > 2 else 0.25
    v = 0.0
    while v <= top_v:
        parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        v += step
    for i, s in enumerate(sizes):
        x0 = left + i * group + group * 0.1
        for j, p in enumerate(procs):
            val = fig[(s, p)][0]
            x = x0 + j * bar
            parts.append(f'<rect x="{x:.1f}" y="{y(val):.1f}" width="{bar - 2:.1f}" height="{y(0) - y(val):.1f}" fill="{COLORS[j % 4]}"/>')
            parts.append(f'<text x="{x + bar / 2 - 1:.1f}" y="{y(val) - 4:.1f}" text-anchor="middle" font-size="10">{val:.2f}</text>')
        parts.append(f'<text x="{left + i * group + group / 2:.1f}" y="{y(0) + 18:.1f}" text-anchor="middle">{s}</text>')
    for j, p in enumerate(procs):
        lx = left + (j % 2) * 360
        ly = h - 30 + (j // 2) * 16
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{COLORS[j % 4]}"/>')
        parts.append(f'<text x="{lx + 18}" y="{ly}">{p}</text>')
    parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="black"/>')
    parts.append("</svg>")
    svg = os.path.join(out_dir, "loadbench-bodies.svg")
    with open(svg, "w") as f:
        f.write("\n".join(parts) + "\n")
    png = os.path.join(out_dir, "loadbench-bodies.png")
    browser = next((c for c in ("chromium", "chromium-browser", "google-chrome") if subprocess.run(
        ["sh", "-c", f"command -v {c}"], capture_output=True).returncode == 0), None)
    if browser:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size={w},{h}", f"--screenshot={png}", "file://" + os.path.abspath(svg)],
                       capture_output=True, timeout=60)
    lb.log(f"chart: {svg}" + (f", {png}" if browser else " (no chromium: no PNG)"))
