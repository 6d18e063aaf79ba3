#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine, once:
# cmake (Pingora builds C dependencies with it), the real peers the tests
# start (nginx as a TLS origin, curl and h2load as HTTP/2 clients, dnsmasq for DNS discovery, etcd for fleet control; HAProxy for the haproxy scheme; nutcracker,
# memcached and libmemcached for the memcached schemes), a TrueType font for
# charts, man (a test renders the generated man pages), headless Chromium
# (a test renders the admin page), and Python's
# prometheus_client (the tests check /metrics with it).
# Only what is missing is installed; needs root or sudo for apt-get.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
# A rollout plan's guards can read Prometheus (`ketama fleet plan run --prometheus`).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v nutcracker >/dev/null 2>&1 || need+=(nutcracker)
# HAProxy: the golden traces of the haproxy scheme are rerun against it.
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
command -v memcached >/dev/null 2>&1 || need+=(memcached)
[ -e /usr/include/libmemcached/memcached.h ] || need+=(libmemcached-dev)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# TLS tests: nginx as a TLS origin, curl for HTTP/2 and SNI, openssl for
# the test certificates; h2load (nghttp2) for many HTTP/2 streams.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
# man renders the generated man pages in a test.
command -v man >/dev/null 2>&1 || need+=(man-db)
# The admin page is checked as a person sees it, in headless Chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v pip3 >/dev/null 2>&1 || python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c 'import prometheus_client' 2>/dev/null ||
  python3 -m pip install -q prometheus-client ||
  python3 -m pip install -q --break-system-packages prometheus-client
# gRPC's C core, the live peer of the envoy-ring-hash scheme.
python3 -c 'import grpc' 2>/dev/null ||
  python3 -m pip install -q grpcio ||
  python3 -m pip install -q --break-system-packages grpcio
