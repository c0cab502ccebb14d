#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) from the Go modules pinned in
# hack/tools/controlplane, because the usual envtest binary downloads are out of reach.
#
# The binaries are cached under the user cache dir, keyed by a hash of the pinned module
# graph and the Go version, and linked into the directory given as $1 (default bin/k8s).
# A rebuild happens only when the pins or the toolchain change.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin/k8s}"
mod=hack/tools/controlplane
k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$mod/go.mod")
key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache_root="${AGENTPLANE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentplane}"
cache="$cache_root/controlplane/$key"

log() { echo "[control-plane] $*" >&2; }

if [[ ! -x "$cache/kube-apiserver" || ! -x "$cache/etcd" ]]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  minor=${k8s_version#v1.}; minor=${minor%%.*}
  start=$SECONDS
  log "building etcd from $mod (about 1 minute on 2 cores the first time)"
  (cd "$mod" && go build -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  log "building kube-apiserver $k8s_version from $mod (about 10 minutes on 2 cores the first time)"
  (cd "$mod" && go build -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$k8s_version \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=$minor" \
      -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$tmp/etcd" "$tmp/kube-apiserver" "$cache/"
  log "built in $((SECONDS - start))s into $cache"
fi

mkdir -p "$out"
for b in kube-apiserver etcd; do
  if [[ "$(readlink -f "$out/$b" 2>/dev/null)" != "$cache/$b" ]]; then
    ln -sfn "$cache/$b" "$out/$b"
  fi
done
