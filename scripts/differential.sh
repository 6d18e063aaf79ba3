#!/usr/bin/env bash
# The live differentials against nginx 1.22 for a long run, each case
# sent as raw bytes to the router and to nginx, each in front of its own
# recording origin:
#   http1: N seeded mutations of valid HTTP/1 requests
#          (tests/nginx_diff_random.rs);
#   http2: N seeded HTTP/2 frame sequences, several streams a connection,
#          a canary stream and a canary connection after each
#          (tests/nginx_diff_h2_random.rs).
# Prints the tally (forwarded, refused by both, each documented
# difference) and fails on any other difference, showing the first ones.
# Installs what it needs first.
#
# Usage: scripts/differential.sh [N] [SEED] [http1|http2|both]
#   (defaults: 20000 cases, seed 1, both)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
N="${1:-20000}"
SEED="${2:-1}"
WHICH="${3:-both}"
if [ "$WHICH" = http1 ] || [ "$WHICH" = both ]; then
  KETAMA_DIFF_CASES="$N" KETAMA_DIFF_SEED="$SEED" \
    cargo test -p ketama-router --test nginx_diff_random -- --nocapture
fi
if [ "$WHICH" = http2 ] || [ "$WHICH" = both ]; then
  KETAMA_H2_DIFF_CASES="$N" KETAMA_H2_DIFF_SEED="$SEED" \
    cargo test -p ketama-router --test nginx_diff_h2_random -- --nocapture
fi
