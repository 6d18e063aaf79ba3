#!/usr/bin/env bash
# Runs the tests the patches over Pingora added (vendor/README.md names
# each with its part), in the vendored crates themselves: they are outside
# the workspace, so `cargo test --workspace` never builds them. Each crate
# builds with the lockfile committed beside it (vendor/CRATE.Cargo.lock,
# its dev-dependencies included), in target/vendor, without debug info.
# Every test named must exist and pass: a renamed or removed test fails the
# run. Measured 2026-12-05 on 2 cores: about 2.5 minutes and 1.1 GB, which
# `--clean` frees at the end (CI passes it).
#   scripts/vendor-tests.sh [--clean]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="$PWD/target/vendor" CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0 CARGO_PROFILE_RELEASE_DEBUG=0

core_tests=(
  # part 5: body bytes without a copy in user space
  protocols::http::v1::body::tests::take_body_hands_out_large_pieces_without_copying_and_never_aliases
  protocols::http::v1::body::tests::take_body_copies_small_pieces_and_leaves_the_overread
  protocols::http::v1::body::tests::take_body_copies_chunks_so_the_parse_goes_on
  protocols::http::v1::server::tests_stream::response_duplex_vec_keeps_the_order_of_small_and_large_pieces
  # part 6: the body read buffer's size
  protocols::http::v1::body::tests::read_buffer_goes_back_to_its_start_once_its_pieces_are_dropped
  protocols::http::v1::body::tests::a_body_of_known_length_takes_no_more_than_itself_and_one_byte
  protocols::http::v1::body::tests::the_body_buffer_size_has_a_floor
  # part 4: a request-target written byte for byte
  protocols::http::v1::client::test_sync::test_verbatim_target_to_wire
  # part 7: a pooled connection taken under its lock
  connectors::tests::test_reuse_across_runtimes_never_loses_the_connection
  # part 8: the upgrade socket's failures are errors
  server::transfer_fd::tests::test_get_fds_from_reports_a_socket_it_cannot_bind
)
timeout_tests=(
  timer::tests::test_idle_clock_naps_and_wakes_for_an_earlier_timer
  timer::tests::test_clock_naps_until_a_far_timer
)

# run CRATE "CARGO TEST ARGS" TEST...: the named tests, exactly, all passing.
run() {
  local crate=$1 args=$2
  shift 2
  cp "vendor/$crate.Cargo.lock" "vendor/$crate/Cargo.lock"
  local out status=0
  # shellcheck disable=SC2086
  out=$(cd "vendor/$crate" && cargo test --locked $args --lib -- --exact "$@" 2>&1) || status=$?
  rm -f "vendor/$crate/Cargo.lock"
  echo "$out" | grep -E '^test |^test result' || true
  if [ "$status" -ne 0 ]; then
    echo "$out" | tail -40 >&2
    echo "vendor-tests: $crate: the patch's tests failed" >&2
    exit 1
  fi
  local passed
  passed=$(echo "$out" | sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' | head -1)
  if [ "$passed" != "$#" ]; then
    echo "vendor-tests: $crate: $# tests named, ${passed:-0} ran: a test was renamed or removed (update this script and vendor/README.md)" >&2
    exit 1
  fi
}

run pingora-core "--features rustls" "${core_tests[@]}"
run pingora-timeout "--release" "${timeout_tests[@]}"
echo "vendor-tests: the patches' $(( ${#core_tests[@]} + ${#timeout_tests[@]} )) tests passed"
if [ "${1:-}" = --clean ]; then
  rm -rf "$CARGO_TARGET_DIR"
fi
