#!/usr/bin/env bash
# The demo, on a fresh Debian machine with rustup: installs what is missing
# (scripts/setup.sh), then starts ketama-router's built-in demo: four
# origins on loopback, the router on 127.0.0.1:8080 (admin API on
# 127.0.0.1:9901; free ports when those are taken), and the curl commands
# to try. Arguments go to the router (`--listen ADDR --admin ADDR`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --release -p ketama-router -- "$@"
