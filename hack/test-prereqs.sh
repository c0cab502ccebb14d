#!/usr/bin/env bash
# make test's prerequisites in two lanes side by side, so that downloads, Debian packages and
# the lighter builds overlap the long Go builds on a fresh machine:
#   - the control plane's lane: kube-apiserver and etcd;
#   - the other lane: the engine and Node (npm), the sandbox's packages and CRIU, the node's
#     packages, chromium (apt, one install at a time), helm, promtool, then the generated
#     files' check and go vet.
# The real node's binaries (make cluster-binaries) are not among them: hack/test-all.sh builds
# them beside the tiers that do not need them, before the node tier starts (after
# kube-apiserver: they reuse the Kubernetes packages its build compiled).
# Each step is cached (README), so on a warm machine this takes seconds plus go vet.
# $1 is the make command (the Makefile passes $(MAKE)).
set -uo pipefail
cd "$(dirname "$0")/.."
make=${1:-make}
start=$SECONDS
"$make" --no-print-directory envtest-assets &
kube=$!
trap 'kill $kube 2>/dev/null' INT TERM
"$make" --no-print-directory engine sandbox-packages node-packages chromium helm promtool verify-generated vet
other=$?
wait $kube
kube_rc=$?
if ((other != 0 || kube_rc != 0)); then
  echo "make test: prerequisites failed (control plane lane exit $kube_rc, other lane exit $other)" >&2
  exit 1
fi
echo "[test] prerequisites ready in $((SECONDS - start))s" >&2
