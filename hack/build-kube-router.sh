#!/usr/bin/env bash
# Builds kube-router (github.com/cloudnativelabs/kube-router/v2/cmd/kube-router, pinned in
# hack/tools/kube-router). The local cluster runs its network policy firewall alone (no BGP
# router, no service proxy: kube-proxy serves Services) so that NetworkPolicies are enforced
# on the real node.
#
# Cached under the user cache dir keyed by the pinned module graph and the Go version, and
# linked into the directory given as $1 (default bin/k8s). `--print-dir` prints the cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/kube-router
. hack/lib/cache.sh
cache="$cache_root/kube-router/$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | cache_key)"
files=(kube-router)

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin/k8s}"
log() { echo "[kube-router] $*" >&2; }

if ! all_cached "$cache" "${files[@]}"; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  version=$(awk '{for (i = 1; i < NF; i++) if ($i == "github.com/cloudnativelabs/kube-router/v2") {print $(i+1); exit}}' "$mod/go.mod")
  log "building kube-router $version (about two minutes on 2 cores the first time)"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
  mv "${files[@]/#/$tmp/}" "$cache/"
  log "built in $((SECONDS - start))s into $cache"
fi

link_cached "$cache" "$out" "${files[@]}"
