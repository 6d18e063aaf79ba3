#!/usr/bin/env bash
# Load benchmark of ketama-router against stock Pingora and nginx, all in one
# invocation: throughput and latency at one and two workers (interleaved
# rounds, medians and spread), the global allocator's effect, the cost of
# bounded loads (factor 125 against off), the 10,000 backend scale (RSS,
# start, reload, p99 during reloads, admin API), and RSS after a connection
# flood; and, asked for by name, TLS (keep-alive HTTPS, full and resumed
# handshakes, HTTP/2 over TLS against nginx and stock Pingora's rustls
# listener: scripts/loadbench_tls.py), cache-sized bodies and 10,000
# keep-alive connections (scripts/loadbench_bodies.py). Prints markdown
# tables, then one summary table, and draws docs/loadbench-bodies.svg/.png
# when the bodies section ran (scripts/loadbench_report.py).
#
# Usage: scripts/loadbench.sh [SECONDS_PER_RUN] [ROUNDS] [SECTIONS]
#   defaults: 10 s, 5 rounds, sections throughput,alloc,balance,scale,flood
#   (also: access_log, tls, bodies, conns, cost, h2, grpc)
#   (add tls, or give it alone: scripts/loadbench.sh 10 5 tls).
#   BASELINE_BIN=DIR adds DIR/router (built before a change) to the cost
#   and bodies sections' rounds, and DIR/stock-jemalloc to the bodies
#   section's, for an A/B of that change.
# Needs nginx, wrk, h2load and openssl (Debian: apt-get install nginx wrk
# nghttp2-client openssl; installed here when run as root and missing),
# cargo and python3. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in nginx wrk h2load openssl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx wrk nghttp2-client openssl >/dev/null
    else
      echo "loadbench: $tool not found: apt-get install nginx wrk nghttp2-client openssl" >&2
      exit 1
    fi
  fi
done
BIN=target/loadbench
mkdir -p "$BIN"
build() { # $1 = output name, $2 = target, rest = cargo flags
  local name=$1 target=$2; shift 2
  cargo build --release -q -p ketama-router "$target" "$@"
  local from=target/release/ketama-router
  [ "$target" = "--bin=ketama-router" ] || from=target/release/examples/${target#--example=}
  cp "$from" "$BIN/$name"
}
echo "building ..." >&2
build router-system --bin=ketama-router --no-default-features
build router-mimalloc --bin=ketama-router --no-default-features --features mimalloc
build stock-system --example=stock_pingora --no-default-features
build rebuild --example=stock_rebuild --no-default-features
build stock-jemalloc --example=stock_pingora
build router --bin=ketama-router
exec python3 scripts/loadbench.py "$BIN" "${1:-10}" "${2:-5}" "${3:-throughput,alloc,balance,scale,flood}"
