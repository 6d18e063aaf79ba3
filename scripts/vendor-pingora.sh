#!/usr/bin/env bash
# Regenerates vendor/pingora-core and vendor/pingora-timeout: each crate
# 0.9.1 as published on crates.io, plus vendor/CRATE.patch (vendor/README.md
# says why).
#   scripts/vendor-pingora.sh          rewrite both copies
#   scripts/vendor-pingora.sh --check  exit 1 if a copy differs from crate + patch
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.9.1
# Cargo.lock's checksums before the patches
crates=(
  "pingora-core a535f47f65fdcb003f9e1df04cd18e614c128dfe9388acce3f211ae38ac14d68"
  "pingora-timeout d58d029af71f7694815494c681f1bb93aa06d83b6fa6a6b42e7154ee0e8e43e4"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for entry in "${crates[@]}"; do
  read -r name sha256 <<<"$entry"
  curl -sSfL -o "$tmp/$name.crate" \
      "https://static.crates.io/crates/$name/$name-$version.crate"
  echo "$sha256  $tmp/$name.crate" | sha256sum -c --quiet
  tar -xzf "$tmp/$name.crate" -C "$tmp"
  src="$tmp/$name-$version"
  rm -f "$src/.cargo-ok" "$src/Cargo.lock" # a path dependency's lock file is unused
  (cd "$src" && patch -p1 --quiet --no-backup-if-mismatch < "$OLDPWD/vendor/$name.patch")
  if [[ "${1:-}" == --check ]]; then
    if diff -r "$src" "vendor/$name"; then
      echo "vendor/$name is $name $version + the patch"
    else
      status=1
    fi
  else
    rm -rf "vendor/$name"
    cp -r "$src" "vendor/$name"
    echo "vendor/$name rewritten from $name $version + the patch"
  fi
done
exit $status
