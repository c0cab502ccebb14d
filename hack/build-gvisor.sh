#!/usr/bin/env bash
# Builds gVisor's runsc and its containerd shim (containerd-shim-runsc-v1) from the Go module
# pinned in hack/tools/gvisor (gVisor's `go` branch, buildable with plain `go build`; never a
# downloaded release) and links them into the directory given as $1 (default bin/k8s), where
# the local cluster looks for them: with both present its containerd gets a `runsc` runtime
# handler and the cluster a RuntimeClass `gvisor`.
#
# The patches in hack/tools/gvisor/patches are applied to a vendored copy of the module first
# (the module cache stays untouched); each says why the node needs it.
#
# Cached under the user cache dir, ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/gvisor/<version>-<key>,
# keyed by the pinned module graph, the patches and the Go version. `--print-dir` prints the
# cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/gvisor
version=$(awk '$1 == "require" && $2 == "gvisor.dev/gvisor" { print $3 }' "$mod/go.mod")
. hack/lib/cache.sh
cache="$cache_root/gvisor/$version-$( { cat "$mod/go.mod" "$mod/go.sum" "$mod"/patches/*.patch; go env GOVERSION; } | cache_key)"
bins=(runsc containerd-shim-runsc-v1)

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin/k8s}"
log() { echo "[gvisor] $*" >&2; }

if ! all_cached "$cache" "${bins[@]}"; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  log "building runsc and containerd-shim-runsc-v1 $version (a few minutes on 2 cores the first time)"
  mkdir "$tmp/src"
  cp "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$tmp/src/"
  (cd "$tmp/src" && go mod vendor)
  for p in "$mod"/patches/*.patch; do
    log "applying $(basename "$p")"
    patch --quiet --forward -d "$tmp/src/vendor" -p1 < "$p"
  done
  # Static, as gVisor's own build makes them; runsc reports the module version.
  (cd "$tmp/src" && CGO_ENABLED=0 go build -mod=vendor -trimpath -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$version" \
      -o "$tmp/runsc" gvisor.dev/gvisor/runsc)
  (cd "$tmp/src" && CGO_ENABLED=0 go build -mod=vendor -trimpath -ldflags "-s -w" \
      -o "$tmp/containerd-shim-runsc-v1" gvisor.dev/gvisor/shim)
  mv "${bins[@]/#/$tmp/}" "$cache/"
  log "built in $((SECONDS - start))s into $cache"
fi

link_cached "$cache" "$out" "${bins[@]}"
