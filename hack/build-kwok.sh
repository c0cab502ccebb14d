#!/usr/bin/env bash
# Builds the kwok controller (sigs.k8s.io/kwok/cmd/kwok, pinned in hack/tools/kwok), which
# simulates the local cluster's KWOK nodes and their pods, and writes the stages it plays:
# the ones kwokctl gives a cluster by default (node initialize, node heartbeat with lease,
# pod ready, complete and delete), taken from the same module's kustomize/stage sources.
#
# Its module pins every module it shares with the control plane and the node binaries at their
# versions, and it is built with their flags (-trimpath, cgo off), so Go's build cache
# compiles the Kubernetes libraries once for all three and for make test's packages
# (internal/devtools/controlplane's test checks the pins agree).
#
# Cached under the user cache dir keyed by the pinned module graph and the Go version, and
# linked into the directory given as $1 (default bin/k8s). `--print-dir` prints
# the cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/kwok
. hack/lib/cache.sh
cache="$cache_root/kwok/$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | cache_key)"
files=(kwok kwok-stages.yaml)

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin/k8s}"
log() { echo "[kwok] $*" >&2; }

if ! all_cached "$cache" "${files[@]}"; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  version=$(awk '{for (i = 1; i < NF; i++) if ($i == "sigs.k8s.io/kwok") {print $(i+1); exit}}' "$mod/go.mod")
  log "building the kwok controller $version (seconds after the node binaries, whose packages it shares)"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
  src=$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  for s in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$src/$s"
  done >"$tmp/kwok-stages.yaml"
  mv "${files[@]/#/$tmp/}" "$cache/"
  log "built in $((SECONDS - start))s into $cache"
fi

link_cached "$cache" "$out" "${files[@]}"
