#!/usr/bin/env bash
# Builds the fuzz targets in fuzz/ with libFuzzer's coverage instrumentation
# and runs each for a bounded time; any crash fails the script loudly (the
# input that crashed is left in fuzz/artifacts/TARGET/).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   default 30 s each, every target. Run longer with e.g. scripts/fuzz.sh 3600.
#
# Toolchain: nightly where the machine has one (rustup), otherwise (or with
# FUZZ_TOOLCHAIN=stable) stable with RUSTC_BOOTSTRAP=1; the instrumentation (-C passes=sancov-module, LLVM
# options) works on both, and no sanitizer or cargo-fuzz is needed.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECS=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(servers_file router_config admin_json request_line haproxy_config routing_key engine_head etcd_answers cache_file pem_files h2_frames)

TOOLCHAIN=()
if [ "${FUZZ_TOOLCHAIN:-}" != stable ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  TOOLCHAIN=(+nightly)
else
  export RUSTC_BOOTSTRAP=1
fi
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR=target/fuzz
# An explicit --target keeps RUSTFLAGS off build scripts and proc macros.
HOST=$(rustc "${TOOLCHAIN[@]}" -vV | sed -n 's/^host: //p')
cargo "${TOOLCHAIN[@]}" build --release --bins --target "$HOST"
BIN="$CARGO_TARGET_DIR/$HOST/release"

status=0
for t in "${TARGETS[@]}"; do
  if [ ! -d "seeds/$t" ]; then
    echo "fuzz: fuzz/seeds/$t is missing: add a directory of seed inputs for the target $t" >&2
    status=1
    continue
  fi
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "fuzz: $t for ${SECS}s"
  if ! "$BIN/$t" "corpus/$t" "seeds/$t" \
      -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 2> "artifacts/$t/log.txt"; then
    echo "fuzz: $t FOUND A CRASH; input and log in fuzz/artifacts/$t/:" >&2
    tail -n 40 "artifacts/$t/log.txt" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "artifacts/$t/log.txt" | tr '\n' ' '
    echo
  fi
done
exit $status
