#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) from the Go modules pinned in
# hack/tools/controlplane, because the usual envtest binary downloads are out of reach.
#
# The build is `agentplane envtest-assets` (internal/devtools/controlplane, which embeds a copy of the
# pins): the binaries are cached under the user cache dir, keyed by a hash of the pinned module
# graph and the Go version, and linked into the directory given as $1 (default bin/k8s).
# A rebuild happens only when the pins or the toolchain change; a cached build is found here
# without compiling the agentplane command.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin/k8s}"
mod=hack/tools/controlplane
key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache_root="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}"
cache="$cache_root/controlplane/$key"

if [[ ! -x "$cache/kube-apiserver" || ! -x "$cache/etcd" ]]; then
  cache=$(go run ./hack/controlplane)
fi

mkdir -p "$out"
for b in kube-apiserver etcd; do
  if [[ "$(readlink -f "$out/$b" 2>/dev/null)" != "$cache/$b" ]]; then
    ln -sfn "$cache/$b" "$out/$b"
  fi
done
