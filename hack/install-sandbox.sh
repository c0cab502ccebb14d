#!/usr/bin/env bash
# Installs bubblewrap (bwrap) from Debian's packages when it is absent: the local runtime runs
# every agent in a bwrap sandbox (README, Isolation). Without root it says why and installs
# nothing: `make run` then serves one workspace only, and the sandbox tests fail under CI=true.
set -euo pipefail
command -v bwrap >/dev/null && exit 0
if [[ $(id -u) != 0 ]]; then
  echo "[sandbox] bubblewrap is not installed and installing it needs root (apt-get install bubblewrap): agents will not be sandboxed" >&2
  exit 0
fi
echo "[sandbox] installing bubblewrap from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends bubblewrap >/dev/null 2>&1 ||
  { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends bubblewrap >/dev/null; }
