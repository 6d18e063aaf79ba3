#!/usr/bin/env bash
# Records real answers of etcd's JSON gateway (Debian's etcd-server) as
# seeds for the etcd_answers fuzz target: a range with and without keys,
# a put, a transaction whose compare fails, a lease grant and keep-alive,
# and a watch stream (creation notice, a put, a delete).
set -euo pipefail
cd "$(dirname "$0")"
DIR=$(mktemp -d)
PORT=${PORT:-23791}
PEER=$((PORT + 1))
etcd --name seed --data-dir "$DIR" \
  --listen-client-urls "http://127.0.0.1:$PORT" --advertise-client-urls "http://127.0.0.1:$PORT" \
  --listen-peer-urls "http://127.0.0.1:$PEER" --initial-advertise-peer-urls "http://127.0.0.1:$PEER" \
  --initial-cluster "seed=http://127.0.0.1:$PEER" >"$DIR/log" 2>&1 &
ETCD=$!
trap 'kill $ETCD; wait $ETCD 2>/dev/null; rm -rf "$DIR"' EXIT
U="http://127.0.0.1:$PORT/v3"
for _ in $(seq 100); do curl -sf "$U/kv/range" -d '{"key":"AA=="}' >/dev/null && break; sleep 0.1; done
b64() { printf '%s' "$1" | base64 -w0; }
K=$(b64 /ketama/seed/config)
curl -s "$U/kv/range" -d "{\"key\":\"$K\"}" > range-empty.json
curl -s "$U/watch" -d "{\"create_request\":{\"key\":\"$(b64 /ketama/seed/)\",\"range_end\":\"$(b64 /ketama/seed0)\"}}" --max-time 3 > watch.jsonl &
WATCH=$!
sleep 0.5
curl -s "$U/kv/put" -d "{\"key\":\"$K\",\"value\":\"$(b64 '[ring]
layout = "compact"')\"}" > put.json
curl -s "$U/kv/range" -d "{\"key\":\"$K\"}" > range.json
curl -s "$U/kv/txn" -d "{\"compare\":[{\"key\":\"$K\",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":\"1\"}],\"success\":[{\"request_put\":{\"key\":\"$K\",\"value\":\"eA==\"}}],\"failure\":[{\"request_range\":{\"key\":\"$K\"}}]}" > txn-failed.json
curl -s "$U/lease/grant" -d '{"TTL": 10}' > grant.json
ID=$(sed -n 's/.*"ID":"\([0-9]*\)".*/\1/p' grant.json)
curl -s "$U/lease/keepalive" -d "{\"ID\":\"$ID\"}" > keepalive.json
curl -s "$U/kv/deleterange" -d "{\"key\":\"$K\"}" > /dev/null
wait $WATCH || true
ls -l
