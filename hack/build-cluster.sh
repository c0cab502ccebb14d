#!/usr/bin/env bash
# Builds the local cluster's node and controller binaries (kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy) from the Go modules pinned in hack/tools/cluster, at the
# Kubernetes version of the control plane (hack/build-controlplane.sh builds kube-apiserver
# and etcd), and the pod sandbox binary (`pause`, from the same module's build/pause).
#
# Its module pins every module it shares with the control plane's at the control plane's
# version, and both build with the same flags (-trimpath and cgo off here and there, whatever
# GOFLAGS the caller has), so Go's build cache compiles the Kubernetes libraries once: after
# kube-apiserver, these take about 3 minutes instead of 15 or more on 2 cores
# (internal/devtools/controlplane's tests check the pins agree and its build's flags). Only
# pause is C (gcc, static).
#
# Cached under the user cache dir keyed by the pinned module graph and the Go version, and
# linked into the directory given as $1 (default bin/k8s). `--print-dir` prints the cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/cluster
k8s_version=$(awk '{for (i = 1; i < NF; i++) if ($i == "k8s.io/kubernetes") {print $(i+1); exit}}' "$mod/go.mod")
cp_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' hack/tools/controlplane/go.mod)
if [[ "$k8s_version" != "$cp_version" ]]; then
  echo "hack/tools/cluster pins k8s.io/kubernetes $k8s_version but the control plane $cp_version" >&2
  exit 1
fi
. hack/lib/cache.sh
cache="$cache_root/cluster/$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; gcc --version | head -1; } | cache_key)"
bins=(kubelet kube-controller-manager kube-scheduler kube-proxy pause)

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin/k8s}"
log() { echo "[cluster] $*" >&2; }

if ! all_cached "$cache" "${bins[@]}"; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  minor=${k8s_version#v1.}; minor=${minor%%.*}
  start=$SECONDS
  log "building kubelet, kube-controller-manager, kube-scheduler and kube-proxy $k8s_version (about 3 minutes on 2 cores after kube-apiserver, whose packages they share)"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w \
      -X k8s.io/component-base/version.gitVersion=$k8s_version \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=$minor" \
      -o "$tmp/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy)
  src=$(cd "$mod" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  log "building pause from $src/build/pause"
  gcc -Os -static -Wall -DVERSION="\"$k8s_version\"" -o "$tmp/pause" "$src/build/pause/linux/pause.c"
  mv "${bins[@]/#/$tmp/}" "$cache/"
  log "built in $((SECONDS - start))s into $cache"
fi

link_cached "$cache" "$out" "${bins[@]}"
