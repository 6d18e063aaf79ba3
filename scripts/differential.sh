#!/usr/bin/env bash
# The live differential against nginx (tests/nginx_diff_random.rs) for a
# long run: N seeded mutations of valid requests (default 20000) from
# SEED (default 1), each sent as raw bytes to the router and to nginx,
# each in front of its own recording origin. Prints the tally (forwarded,
# refused by both, each documented difference) and fails on any other
# difference, showing the first ones. Installs what it needs first.
#
# Usage: scripts/differential.sh [N] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
KETAMA_DIFF_CASES="${1:-20000}" KETAMA_DIFF_SEED="${2:-1}" \
  exec cargo test -p ketama-router --test nginx_diff_random -- --nocapture
