#!/usr/bin/env bash
# Every test, on a fresh Debian machine with rustup: installs what is
# missing (scripts/setup.sh: the real peers the tests start), then
# `cargo test --workspace`. Arguments go to cargo test. `.ci/run` runs
# this, plus formatting, lints and a short fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo test --workspace "$@"
