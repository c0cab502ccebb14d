#!/usr/bin/env bash
# Installs what the local runtime's agent sandbox needs from Debian's packages when absent:
# bubblewrap (bwrap; every agent runs in a sandbox, README, Isolation), tini (a checkpointed
# sandbox's PID 1) and CRIU's build dependencies, then builds CRIU into bin/criu
# (hack/build-criu.sh, cached): suspended gateways are checkpointed and restored with it. All
# of this needs root: without it the script says why and installs nothing; `make run` then
# serves one workspace only and cold-starts resumed agents, and the sandbox and checkpoint
# tests fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
[[ -x /usr/bin/tini ]] || need+=(tini)
for pkg in libbsd-dev libnet1-dev libnftables-dev libnl-3-dev libprotobuf-c-dev libprotobuf-dev \
  protobuf-c-compiler protobuf-compiler pkgconf; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [[ $(id -u) != 0 ]]; then
  ((${#need[@]} == 0)) || echo "[sandbox] ${need[*]} not installed and installing needs root: agents will not be sandboxed nor checkpointed" >&2
  exit 0
fi
if ((${#need[@]})); then
  echo "[sandbox] installing ${need[*]} from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi
hack/build-criu.sh bin
hack/build-reseed.sh bin
