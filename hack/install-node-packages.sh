#!/usr/bin/env bash
# Installs what the local cluster's real node needs from Debian's packages when it is absent:
# containerd (with its CRI plugin and ctr), runc, the CNI plugins, iptables, ipset (for
# kube-router's firewall) and tini (the gateway image's PID 1). Without root it says why and
# installs nothing: the real-node tests then skip, except under CI=true, where they fail.
set -euo pipefail
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v ipset >/dev/null || need+=(ipset)
[[ -x /usr/bin/tini-static ]] || need+=(tini)
if (( ${#need[@]} == 0 )); then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "[node] the real node needs root to install ${need[*]}; skipping (its tests skip too)" >&2
  exit 0
fi
echo "[node] installing ${need[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
  { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
