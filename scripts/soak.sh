#!/usr/bin/env bash
# The chaos soak, long (a benchmark, not a test): two release-built
# routers, a three-member etcd cluster and five origins under steady
# load while a seeded scheduler kills, stalls and corrupts origins, kills
# etcd members and leaders, pushes broken and good configs and rollouts,
# and reloads the routers (crates/ketama-router/tests/soak/). It fails on
# any failure the fault log does not explain, a panic or unexplained
# ERROR in a router's log, a change slow to show in /status, or (runs of
# five minutes or more) RSS or descriptors growing over 10% from minute 2.
#
# Usage: scripts/soak.sh [MINUTES] [SEED]    (default 30 minutes, a new random
# seed; `cargo test` replays one fixed seed instead)
# The table is printed and written to target/soak-report.md. CI runs the
# same test for 60 seconds as part of `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-30}
scripts/setup.sh
export KETAMA_SOAK_SECONDS=$((MINUTES * 60))
export KETAMA_SOAK_REPORT="$PWD/target/soak-report.md"
export KETAMA_SOAK_SEED=${2:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
exec cargo test --release -p ketama-router --test soak -- soak_under_chaos --nocapture
