#!/usr/bin/env bash
# Builds the Debian package with `cargo deb -p ketama-router` and checks it
# the way an operator meets it: every file in place with its mode, the
# unit verified and its sandbox scored by systemd-analyze (exposure at most
# 2.0), then installed (root on a throwaway machine: CI), the packaged
# router checking the packaged config once the token is set, every
# installed man page rendered without a warning, bash completing
# `ketama ro`, an edited config kept across an upgrade and a removal and
# gone after a purge. Installs cargo-deb (from crates.io) when missing.
#
# PACKAGE_PROFILE picks the cargo profile (default `deb`, the release
# package). CI sets `dev`: every check here is about the package, not the
# optimiser, and `dev` reuses the test build's dependencies where `deb`
# is a fresh release build of everything (7 of CI's 30 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "package-test: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root: it installs and removes the package"
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked --version 3.8.0
cargo deb -p ketama-router --profile "${PACKAGE_PROFILE:-deb}"
deb=$(ls -t target/debian/ketama-router_*.deb | head -1)
echo "package-test: $deb"

list=$(dpkg-deb -c "$deb")
want() { # mode path
  echo "$list" | awk -v m="$1" -v p="./$2" '$1 == m && $NF == p { found = 1 } END { exit !found }' ||
    fail "$2 is missing or not $1 in the package"
}
want -rwxr-xr-x usr/bin/ketama-router
want -rwxr-xr-x usr/bin/ketama
want -rw-r--r-- etc/ketama/router.toml
want -rw------- etc/default/ketama-router
for m in ketama ketama-route ketama-diff ketama-analyze ketama-fleet; do
  echo "$list" | grep -Eq "\./usr/share/man/man1/$m\.1(\.gz)?$" || fail "man page $m(1) missing"
done
echo "$list" | grep -Eq '\./usr/share/man/man8/ketama-router\.8(\.gz)?$' || fail "ketama-router(8) missing"
echo "$list" | grep -Eq '\./usr/share/man/man5/ketama-router\.toml\.5(\.gz)?$' || fail "ketama-router.toml(5) missing"
want -rw-r--r-- usr/share/bash-completion/completions/ketama
want -rw-r--r-- usr/share/zsh/vendor-completions/_ketama
want -rw-r--r-- usr/share/fish/vendor_completions.d/ketama.fish
echo "$list" | grep -Eq '\./usr/share/doc/ketama-router/copyright$' || fail "the license (copyright) is missing"
echo "$list" | grep -Eq '\./usr/share/doc/ketama-router/changelog\.Debian\.gz$' || fail "the changelog is missing"
unit_path=$(echo "$list" | awk '$NF ~ /systemd\/system\/ketama-router\.service$/ { print $NF }')
[ -n "$unit_path" ] || fail "the systemd unit is missing"
dpkg-deb -f "$deb" Description | grep -q "cache server" || fail "the description does not say what it is for"

work=$(mktemp -d)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" "$unit_path"
score=$(systemd-analyze security --offline=true "$work/$unit_path" 2>/dev/null |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || fail "systemd-analyze security printed no score"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "exposure $score is over 2.0"
echo "package-test: systemd-analyze security exposure $score"

dpkg -r ketama-router >/dev/null 2>&1 || true
dpkg -P ketama-router >/dev/null 2>&1 || true
dpkg -i "$deb" >/dev/null
systemd-analyze verify "/${unit_path#./}" || fail "systemd-analyze verify found problems"
if KETAMA_ADMIN_TOKEN= /usr/bin/ketama-router --config /etc/ketama/router.toml --check 2>"$work/err"; then
  fail "--check passed without a token"
fi
grep -q KETAMA_ADMIN_TOKEN "$work/err" || fail "--check without a token does not name the variable: $(cat "$work/err")"
KETAMA_ADMIN_TOKEN=s3cret /usr/bin/ketama-router --config /etc/ketama/router.toml --check |
  grep -q "config OK" || fail "the packaged config does not pass --check with a token"
for page in $(dpkg -L ketama-router | grep '^/usr/share/man/'); do
  [ -f "$page" ] || continue
  warnings=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$page: $warnings"
done
got=$(bash -c 'source /usr/share/bash-completion/completions/ketama; COMP_WORDS=(ketama ro); COMP_CWORD=1; _ketama ketama ro ketama; echo "${COMPREPLY[*]}"')
[ "$got" = route ] || fail "bash completes 'ketama ro' as '$got'"

# The config is a conffile: an edit survives an upgrade and a removal; a
# purge takes it.
echo "# edited by the operator" >> /etc/ketama/router.toml
dpkg -i --force-confold "$deb" >/dev/null
grep -q "edited by the operator" /etc/ketama/router.toml || fail "an upgrade overwrote the edited config"
dpkg -r ketama-router >/dev/null
grep -q "edited by the operator" /etc/ketama/router.toml || fail "a removal took the edited config"
dpkg -P ketama-router >/dev/null
[ ! -e /etc/ketama/router.toml ] || fail "a purge left /etc/ketama/router.toml"
rm -rf "$work"
echo "package-test: ok"
