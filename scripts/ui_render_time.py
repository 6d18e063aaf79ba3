#!/usr/bin/env python3
"""Loads a page in headless Chromium in real time (the DevTools protocol
over --remote-debugging-pipe, no extra package) and prints, as JSON, the
data-* timings the ketama admin page writes on <body> after each refresh,
read SECONDS after the load; with PNG, a 1400-pixel-wide screenshot of the
whole page too.  Usage: ui_render_time.py URL [SECONDS [PNG]]"""
import base64, json, os, subprocess, sys, tempfile, time

url, wait = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 6
r_child, w_parent = os.pipe()  # parent -> chromium (its fd 3)
r_parent, w_child = os.pipe()  # chromium -> parent (its fd 4)
profile = tempfile.mkdtemp()

def fds():
    # Through a spare number first: dup2 onto itself would keep the pipe's
    # close-on-exec flag.
    r, w = os.dup(r_child), os.dup(w_child)
    os.dup2(r, 3)
    os.dup2(w, 4)

proc = subprocess.Popen(
    ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
    # close_fds would close 3 and 4 after preexec_fn made them.
    preexec_fn=fds, close_fds=False,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.close(r_child)
os.close(w_child)
buf, ids = b"", [0]

def call(method, params=None, session=None):
    ids[0] += 1
    msg = {"id": ids[0], "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    os.write(w_parent, json.dumps(msg).encode() + b"\0")
    global buf
    while True:
        while b"\0" not in buf:
            chunk = os.read(r_parent, 1 << 20)
            if not chunk:
                sys.exit("chromium closed the pipe")
            buf += chunk
        line, buf = buf.split(b"\0", 1)
        reply = json.loads(line)
        if reply.get("id") == ids[0]:
            if "error" in reply:
                sys.exit(f"{method}: {reply['error']}")
            return reply["result"]

try:
    target = call("Target.createTarget", {"url": url})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    if len(sys.argv) > 3:
        call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session)
    time.sleep(wait)
    expr = "JSON.stringify({...document.body.dataset, rows: document.querySelectorAll('#rows tr').length})"
    out = call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
    print(out["result"]["value"])
    if len(sys.argv) > 3:
        h = call("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight", "returnByValue": True}, session)
        call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": h["result"]["value"], "deviceScaleFactor": 1, "mobile": False}, session)
        time.sleep(0.5)
        png = call("Page.captureScreenshot", {"format": "png"}, session)["data"]
        with open(sys.argv[3], "wb") as f:
            f.write(base64.b64decode(png))
finally:
    proc.kill()
