#!/usr/bin/env bash
# Puts this machine back where a fresh one starts (README, "A fresh machine"): removes what
# `make run` and `make test` keep outside a clone so that the next run builds and installs
# everything again, as CI's fresh machines do:
#   - the project's cache (${AGENTPLANE_CACHE_DIR:-~/.cache/agentplane}: the control plane, the
#     node binaries, CRIU, gVisor, kwok, kube-router, helm, promtool, the engines and Node,
#     the npm packages of the tests, the gateway and manager images);
#   - Go's build, test and module caches, golangci-lint's analysis cache, and npm's cache;
#   - the fake engine's builds in the temp dir, and this clone's bin/ and state dirs.
# With --packages (root) it also purges the Debian packages the install scripts add when they
# are absent (hack/install-sandbox.sh, hack/install-node-packages.sh, hack/install-chromium.sh).
# Run `make test` after it to time a cold run.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/cache.sh
packages=false
case "${1:-}" in
--packages) packages=true ;;
"") ;;
*)
  echo "usage: $0 [--packages]" >&2
  exit 2
  ;;
esac
log() { echo "[clean] $*" >&2; }

log "removing $cache_root"
rm -rf "$cache_root"
log "removing Go's build, test and module caches, and golangci-lint's"
go clean -cache -testcache -modcache
rm -rf "${GOLANGCI_LINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/golangci-lint}"
if command -v npm >/dev/null; then
  log "removing npm's cache"
  npm cache clean --force --loglevel=error
fi
log "removing ${TMPDIR:-/tmp}/agentplane-*, Node's compile cache there and this clone's bin/ and .agentplane*"
rm -rf "${TMPDIR:-/tmp}"/agentplane-* "${TMPDIR:-/tmp}"/node-compile-cache bin .agentplane .agentplane-kube

if $packages; then
  if [[ $(id -u) != 0 ]]; then
    echo "[clean] --packages needs root" >&2
    exit 1
  fi
  installed=()
  for pkg in bubblewrap tini libbsd-dev libnet1-dev libnftables-dev libnl-3-dev libprotobuf-c-dev \
    libprotobuf-dev protobuf-c-compiler protobuf-compiler containerd runc containernetworking-plugins \
    iptables ipset chromium; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && installed+=("$pkg")
  done
  if ((${#installed[@]})); then
    log "purging ${installed[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${installed[@]}" >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get autoremove -y -q >/dev/null
  fi
fi
log "done: the next make run or make test starts cold"
