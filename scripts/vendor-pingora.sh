#!/usr/bin/env bash
# Regenerates vendor/pingora-core: pingora-core 0.9.1 as published on
# crates.io, plus vendor/pingora-core.patch (vendor/README.md says why).
#   scripts/vendor-pingora.sh          rewrite vendor/pingora-core
#   scripts/vendor-pingora.sh --check  exit 1 if the copy differs from crate + patch
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.9.1
sha256=a535f47f65fdcb003f9e1df04cd18e614c128dfe9388acce3f211ae38ac14d68 # Cargo.lock's checksum before the patch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -sSfL -o "$tmp/crate.tar.gz" \
    "https://static.crates.io/crates/pingora-core/pingora-core-$version.crate"
echo "$sha256  $tmp/crate.tar.gz" | sha256sum -c --quiet
tar -xzf "$tmp/crate.tar.gz" -C "$tmp"
src="$tmp/pingora-core-$version"
rm -f "$src/.cargo-ok" "$src/Cargo.lock" # a path dependency's lock file is unused
(cd "$src" && patch -p1 --quiet --no-backup-if-mismatch < "$OLDPWD/vendor/pingora-core.patch")
if [[ "${1:-}" == --check ]]; then
    diff -r "$src" vendor/pingora-core && echo "vendor/pingora-core is pingora-core $version + the patch"
else
    rm -rf vendor/pingora-core
    cp -r "$src" vendor/pingora-core
    echo "vendor/pingora-core rewritten from pingora-core $version + the patch"
fi
