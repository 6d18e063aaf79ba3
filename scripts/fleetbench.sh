#!/usr/bin/env bash
# Fifty release routers against one three-member etcd cluster (a
# benchmark, not a test): 100 rollout and 20 config changes, the time
# from each write to the last router, CPU of etcd and of the routers idle
# and changing, their RSS, and the ring every sampled request saw
# (crates/ketama-router/tests/fleet_fifty.rs). The table is printed and
# written to target/fleet-report.md.
#
# Usage: scripts/fleetbench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ulimit -n 65536 2>/dev/null || true
export KETAMA_FLEET_REPORT="$PWD/target/fleet-report.md"
exec cargo test --release -p ketama-router --test fleet_fifty -- --ignored --nocapture
