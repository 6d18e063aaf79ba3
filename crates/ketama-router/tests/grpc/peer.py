#!/usr/bin/env python3
"""Live gRPC peers for the router's tests (Python's grpcio: the gRPC C core).

  peer.py servers N [--tls CERT KEY]
      N servers on loopback ports the kernel picks; prints {"ports": [...]}
      on one line, then serves until standard input closes.
  peer.py call TARGET SCENARIO [ARGS...] [--ca CA --name NAME] [--key KEY]
      one scenario through TARGET (the router); prints one JSON line.

Service `test.Echo`, raw bytes (no protobuf): every answer carries the
serving port as initial metadata `x-port`.
  Unary         echoes the request; trailing metadata x-trailer: t-PORT
  ServerStream  the request is a count N: N messages b"mI" ("N SIZE": N
                messages of SIZE bytes)
  ClientStream  answers {"count", "bytes"} of what it read
  Bidi          echoes each message as it comes
  Fail          INVALID_ARGUMENT "bad argument"
  Sleep         the request is milliseconds: sleeps them unless cancelled
  Events        {"cancelled": [[time, remaining], ...]}: Sleep calls
                cancelled (wall clock), and the deadline each saw
  Deadline      {"remaining": seconds or null}: the deadline it was given
grpc.health.v1.Health/Check answers SERVING (b"\\x08\\x01").
"""

import json
import sys
import threading
import time
from concurrent import futures

import os

# gRPC C core reads requestHashHeader only with this set (gRFC A76).
os.environ.setdefault("GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY", "true")

import grpc  # noqa: E402

EVENTS = []
LOCK = threading.Lock()


def port_md(context, port):
    context.send_initial_metadata((("x-port", str(port)),))


def handlers(port):
    def unary(req, context):
        port_md(context, port)
        context.set_trailing_metadata((("x-trailer", "t-%d" % port),))
        return req

    def server_stream(req, context):
        port_md(context, port)
        n, _, size = req.partition(b" ")
        for i in range(int(n)):
            yield b"m%d" % i if not size else b"z" * int(size)

    def client_stream(it, context):
        port_md(context, port)
        count = size = 0
        for m in it:
            count += 1
            size += len(m)
        return json.dumps({"count": count, "bytes": size}).encode()

    def bidi(it, context):
        port_md(context, port)
        for m in it:
            yield m

    def fail(req, context):
        port_md(context, port)
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad argument")

    def sleep(req, context):
        port_md(context, port)
        remaining = context.time_remaining()
        end = time.monotonic() + int(req) / 1000
        while time.monotonic() < end:
            if not context.is_active():
                with LOCK:
                    EVENTS.append([time.time(), remaining])
                return b""
            time.sleep(0.002)
        return b"slept"

    def events(req, context):
        with LOCK:
            return json.dumps({"cancelled": EVENTS}).encode()

    def deadline(req, context):
        return json.dumps({"remaining": context.time_remaining()}).encode()

    u = grpc.unary_unary_rpc_method_handler
    return [
        grpc.method_handlers_generic_handler(
            "test.Echo",
            {
                "Unary": u(unary),
                "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
                "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
                "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
                "Fail": u(fail),
                "Sleep": u(sleep),
                "Events": u(events),
                "Deadline": u(deadline),
            },
        ),
        grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health", {"Check": u(lambda req, ctx: b"\x08\x01")}
        ),
    ]


BIG = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]


def servers(n, tls):
    running, ports = [], []
    for _ in range(n):
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=BIG)
        if tls:
            cert, key = (open(p, "rb").read() for p in tls)
            creds = grpc.ssl_server_credentials([(key, cert)])
            port = s.add_secure_port("127.0.0.1:0", creds)
        else:
            port = s.add_insecure_port("127.0.0.1:0")
        s.add_generic_rpc_handlers(handlers(port))
        s.start()
        running.append(s)
        ports.append(port)
    print(json.dumps({"ports": ports}), flush=True)
    sys.stdin.read()
    for s in running:
        s.stop(0)


def channel(target, ca, name):
    if ca:
        creds = grpc.ssl_channel_credentials(root_certificates=open(ca, "rb").read())
        opts = BIG + [("grpc.ssl_target_name_override", name)]
        return grpc.secure_channel(target, creds, options=opts)
    return grpc.insecure_channel(target, options=BIG)


def outcome(fn):
    """Runs fn; its result, or the call's error code and details."""
    try:
        return fn()
    except grpc.RpcError as e:
        md = dict(e.initial_metadata() or ()) if hasattr(e, "initial_metadata") else {}
        return {"code": e.code().value[0], "details": e.details(), "port": md.get("x-port")}


def unary_call(ch, key, size, timeout=None):
    call = ch.unary_unary("/test.Echo/Unary")
    md = (("x-key", key),) if key else ()

    def go():
        reply, c = call.with_call(b"x" * size, metadata=md, timeout=timeout)
        return {
            "code": 0,
            "port": dict(c.initial_metadata()).get("x-port"),
            "trailer": dict(c.trailing_metadata()).get("x-trailer"),
            "len": len(reply),
            "same": reply == b"x" * size,
        }

    return outcome(go)


def call(target, scenario, args, ca, name, key):
    ch = channel(target, ca, name)
    if scenario == "unary":
        return unary_call(ch, key, int(args[0]))
    if scenario == "keys":
        # Each key through the router, and through gRPC's own ring_hash
        # over the servers (args: the count, then gRPC's target and ring
        # sizes), with the same metadata.
        n, direct, lo, hi = int(args[0]), args[1], int(args[2]), int(args[3])
        cfg = {"loadBalancingConfig": [{"ring_hash_experimental": {
            "minRingSize": lo, "maxRingSize": hi, "requestHashHeader": "x-key"}}]}
        own = grpc.insecure_channel(direct, options=[("grpc.service_config", json.dumps(cfg))])
        routed, picked = [], []
        for i in range(n):
            k = "key-%d" % i
            routed.append(unary_call(ch, k, 1).get("port"))
            picked.append(unary_call(own, k, 1).get("port"))
        return {"routed": routed, "picked": picked}
    if scenario == "multikeys":
        # As "keys", each call with two or three values of x-key.
        n, direct, lo, hi = int(args[0]), args[1], int(args[2]), int(args[3])
        cfg = {"loadBalancingConfig": [{"ring_hash_experimental": {
            "minRingSize": lo, "maxRingSize": hi, "requestHashHeader": "x-key"}}]}
        own = grpc.insecure_channel(direct, options=[("grpc.service_config", json.dumps(cfg))])
        routed, picked = [], []
        for i in range(n):
            md = tuple(("x-key", "k%d-%d" % (i, j)) for j in range(2 + i % 2))
            port = lambda c: dict(c.initial_metadata()).get("x-port")
            routed.append(port(ch.unary_unary("/test.Echo/Unary").with_call(b"x", metadata=md)[1]))
            picked.append(port(own.unary_unary("/test.Echo/Unary").with_call(b"x", metadata=md)[1]))
        return {"routed": routed, "picked": picked}
    if scenario == "stream":
        def go():
            it = ch.unary_stream("/test.Echo/ServerStream")(args[0].encode(), metadata=(("x-key", key),))
            msgs = list(it)
            ok = all(m == b"m%d" % i for i, m in enumerate(msgs))
            return {"code": 0, "count": len(msgs), "in_order": ok}
        return outcome(go)
    if scenario == "client_stream":
        n, size = int(args[0]), int(args[1])
        def go():
            reply = ch.stream_unary("/test.Echo/ClientStream")(
                (b"y" * size for _ in range(n)), metadata=(("x-key", key),))
            return dict(json.loads(reply), code=0)
        return outcome(go)
    if scenario == "bidi":
        n = int(args[0])
        def go():
            # Lock step: the next message goes only once the previous one
            # came back, so every message crossed the router alone.
            q, got = [], []
            ready = threading.Event()
            def requests():
                for i in range(n):
                    ready.clear()
                    yield b"b%d" % i
                    if not ready.wait(10):
                        return
            it = ch.stream_stream("/test.Echo/Bidi")(requests(), metadata=(("x-key", key),))
            for m in it:
                got.append(m)
                ready.set()
            return {"code": 0, "count": len(got), "in_order": got == [b"b%d" % i for i in range(n)]}
        return outcome(go)
    if scenario == "fail":
        return outcome(lambda: ch.unary_unary("/test.Echo/Fail")(b"", metadata=(("x-key", key),)))
    if scenario == "deadline":
        ms, timeout = args[0], float(args[1])
        began = time.monotonic()
        r = outcome(lambda: ch.unary_unary("/test.Echo/Sleep")(
            ms.encode(), metadata=(("x-key", key),), timeout=timeout))
        if isinstance(r, bytes):
            r = {"code": 0}
        r["took"] = time.monotonic() - began
        return r
    if scenario == "seen_deadline":
        timeout = float(args[0])
        return json.loads(ch.unary_unary("/test.Echo/Deadline")(
            b"", metadata=(("x-key", key),), timeout=timeout))
    if scenario == "cancel":
        fut = ch.unary_unary("/test.Echo/Sleep").future(b"5000", metadata=(("x-key", key),))
        time.sleep(float(args[0]))
        at = time.time()
        fut.cancel()
        return {"cancelled_at": at, "code": outcome(fut.result).get("code") if not fut.cancelled() else 1}
    if scenario == "events":
        return json.loads(ch.unary_unary("/test.Echo/Events")(b"", metadata=(("x-key", key),)))
    raise SystemExit("unknown scenario %r" % scenario)


def main():
    a = sys.argv[1:]
    opt = {}
    for flag in ("--tls", "--ca", "--name", "--key"):
        if flag in a:
            i = a.index(flag)
            width = 2 if flag == "--tls" else 1
            opt[flag] = a[i + 1:i + 1 + width]
            del a[i:i + 1 + width]
    if a[0] == "servers":
        servers(int(a[1]), opt.get("--tls"))
    elif a[0] == "call":
        ca = opt.get("--ca", [None])[0]
        name = opt.get("--name", [None])[0]
        key = opt.get("--key", ["k"])[0]
        print(json.dumps(call(a[1], a[2], a[3:], ca, name, key)), flush=True)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
