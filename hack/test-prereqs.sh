#!/usr/bin/env bash
# make test's prerequisites in two lanes side by side, so that downloads, Debian packages and
# the lighter builds overlap the long Go builds on a fresh machine:
#   - the control plane's lane: kube-apiserver and etcd, then the real node's Kubernetes
#     binaries and kwok (they reuse the Kubernetes packages kube-apiserver's build compiled);
#   - the other lane: the engine and Node (npm), the sandbox's packages and CRIU, the node's
#     packages, chromium (apt, one install at a time), kube-router, gVisor, then helm and
#     promtool, last: they share the Kubernetes client libraries with kube-apiserver at one
#     version and build flags, so by then most of their packages are in Go's build cache.
# The generated files' check, go vet and the linters run in the tests' light lane
# (hack/test-all.sh), beside the heavy tests and yielding the CPU to them.
# Everything is built before any test starts. Built beside the tests instead, the node's
# binaries got a small share of the CPU (with the kernel's autogroups each gateway's session
# weighs as much as the whole build) and held the node tier back: on a fresh machine they took
# 50 minutes instead of 15, and the run 81 minutes.
# Each step is cached (README), so on a warm machine this takes seconds plus go vet.
# $1 is the make command (the Makefile passes $(MAKE)).
set -uo pipefail
cd "$(dirname "$0")/.."
make=${1:-make}
start=$SECONDS
"$make" --no-print-directory envtest-assets kube-binaries &
kube=$!
trap 'kill $kube 2>/dev/null' INT TERM
"$make" --no-print-directory engine sandbox-packages node-packages chromium kube-router gvisor helm promtool
other=$?
wait $kube
kube_rc=$?
if ((other != 0 || kube_rc != 0)); then
  echo "make test: prerequisites failed (control plane lane exit $kube_rc, other lane exit $other)" >&2
  exit 1
fi
echo "[test] prerequisites ready in $((SECONDS - start))s" >&2
