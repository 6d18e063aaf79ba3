#!/usr/bin/env bash
# Load benchmark: nginx (hash $request_uri consistent), a stock Pingora
# proxy with pingora-load-balancing's KetamaHashing, and ketama-router, over
# the same loopback backends (an nginx answering 200 on 4 ports), each driven
# by wrk in turn, interleaved over ROUNDS rounds; prints markdown tables of
# the medians: requests/s and p50/p99 latency.
#
# Usage: scripts/loadbench.sh [SECONDS_PER_RUN] [ROUNDS]
# Needs: nginx and wrk (apt-get install nginx wrk), cargo. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10}
ROUNDS=${2:-3}
CONNS=${CONNS:-32}
command -v nginx >/dev/null || { echo "nginx not found: apt-get install nginx" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }
cargo build --release -q -p ketama-router --bin ketama-router --example stock_pingora
BIN=target/release
W=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 0.5; rm -rf "$W"; }
trap cleanup EXIT

BACKENDS=(127.0.0.1:19001 127.0.0.1:19002 127.0.0.1:19003 127.0.0.1:19004)

# The origins: one nginx worker answering 200 on four ports.
cat > "$W/origin.conf" <<CONF
worker_processes 1; daemon off; pid $W/origin.pid; error_log $W/origin.err crit;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
$(for b in "${BACKENDS[@]}"; do echo "server { listen $b; location / { return 200 \"ok\n\"; } }"; done)
}
CONF
nginx -p "$W" -c "$W/origin.conf" & PIDS+=($!)

# nginx as the router: N workers, keep-alive to the backends.
nginx_proxy() { # $1 = workers, $2 = port
  cat > "$W/proxy-$2.conf" <<CONF
worker_processes $1; daemon off; pid $W/proxy-$2.pid; error_log $W/proxy-$2.err crit;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  upstream backend { hash \$request_uri consistent; keepalive 128;
$(for b in "${BACKENDS[@]}"; do echo "    server $b max_fails=0;"; done)
  }
  server { listen 127.0.0.1:$2;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
CONF
  nginx -p "$W" -c "$W/proxy-$2.conf" & PIDS+=($!)
}

# ketama-router with a given [server] block.
ketama_router() { # $1 = port, $2 = extra [server] lines
  cat > "$W/router-$1.toml" <<CONF
[server]
listen = ["127.0.0.1:$1"]
$2
[admin]
listen = "127.0.0.1:$(( $1 + 1000 ))"
auth = false
[ring]
layout = "compact"
[health]
path = "/"
$(for b in "${BACKENDS[@]}"; do printf '[[backends]]\naddress = "%s"\n' "$b"; done)
CONF
  RUST_LOG=error "$BIN/ketama-router" --config "$W/router-$1.toml" > /dev/null 2>&1 & PIDS+=($!)
}

stock() { # $1 = port, $2 = threads, $3 = extra flags
  RUST_LOG=error "$BIN/examples/stock_pingora" --listen "127.0.0.1:$1" --threads "$2" ${3:-} "${BACKENDS[@]}" > /dev/null 2>&1 & PIDS+=($!)
}

# Varied URIs so that requests spread over the ring.
cat > "$W/uri.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/assets/" .. (n % 100000) .. "/object.jpg?v=" .. (n % 7))
end
LUA

wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 did not open" >&2; exit 1; }

# One wrk run: prints "RPS P50_MS P99_MS".
run_wrk() { # $1 = port, $2 = wrk threads
  wrk -t"$2" -c"$CONNS" -d"${DUR}s" --latency -s "$W/uri.lua" "http://127.0.0.1:$1/" > "$W/wrk.out" 2>&1
  local rps p50 p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk.out")
  p50=$(awk '$1=="50%" {print $2}' "$W/wrk.out")
  p99=$(awk '$1=="99%" {print $2}' "$W/wrk.out")
  non2xx=$(awk '/Non-2xx/ {print $4}' "$W/wrk.out")
  if [ -n "$non2xx" ]; then echo "warning: port $1 answered $non2xx non-2xx responses" >&2; fi
  echo "$rps $(ms "$p50") $(ms "$p99")"
}
ms() { case "$1" in *us) echo "${1%us}" | awk '{print $1/1000}';; *ms) echo "${1%ms}";; *s) echo "${1%s}" | awk '{print $1*1000}';; *) echo "$1";; esac; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# table NAME:PORT:WRK_THREADS ...
table() {
  declare -A res
  for r in $(seq 1 "$ROUNDS"); do
    for spec in "$@"; do
      IFS=: read -r name port wt <<< "$spec"
      res["$name"]+="$(run_wrk "$port" "$wt")"$'\n'
    done
  done
  local base=""
  echo "| proxy | requests/s | p50 ms | p99 ms | vs nginx |"
  echo "|---|---:|---:|---:|---:|"
  for spec in "$@"; do
    IFS=: read -r name port wt <<< "$spec"
    local rps p50 p99
    rps=$(printf '%s' "${res[$name]}" | awk 'NF {print $1}' | median)
    p50=$(printf '%s' "${res[$name]}" | awk 'NF {print $2}' | median)
    p99=$(printf '%s' "${res[$name]}" | awk 'NF {print $3}' | median)
    [ -z "$base" ] && base=$rps
    echo "| $name | $rps | $p50 | $p99 | $(awk -v a="$rps" -v b="$base" 'BEGIN {printf "%.2f", a/b}') |"
  done
}

# Headline: one worker each.
nginx_proxy 1 18081
stock 18082 1
ketama_router 18083 "threads = 1"
# ketama-router settings tried one at a time.
ketama_router 18084 "threads = 1
work_stealing = true"
stock 18088 1 --no-steal
ketama_router 18085 "threads = 1
upstream_keepalive_pool_size = 0"
ketama_router 18086 "threads = 1
trace_sample = 0.01"
ketama_router 18087 "threads = 1
response_headers = false"
for p in 19001 18081 18082 18083 18084 18085 18086 18087 18088; do wait_port $p; done
sleep 1

echo "## One worker each ($CONNS connections, wrk 1 thread, ${DUR}s x $ROUNDS rounds, medians)"
echo
table "nginx (hash \$request_uri consistent)":18081:1 "stock Pingora (KetamaHashing)":18082:1 "ketama-router":18083:1
echo
echo "## ketama-router settings (one worker)"
echo
table "nginx":18081:1 "ketama-router (defaults, work_stealing = false)":18083:1 "work_stealing = true (Pingora's default)":18084:1 "upstream_keepalive_pool_size = 0":18085:1 "trace_sample = 0.01":18086:1 "response_headers = false":18087:1 "stock Pingora, work_stealing = false":18088:1
echo

# Two workers each.
nginx_proxy 2 18091
stock 18092 2
ketama_router 18093 "threads = 2"
for p in 18091 18092 18093; do wait_port $p; done
sleep 1
echo "## Two workers each (wrk 2 threads)"
echo
table "nginx (2 workers)":18091:2 "stock Pingora (2 threads)":18092:2 "ketama-router (2 threads)":18093:2
