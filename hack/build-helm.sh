#!/usr/bin/env bash
# Builds helm from the Go module pinned in hack/tools/helm (never a downloaded release) and
# prints the path of the binary on stdout; `make helm` links it as bin/helm.
#
# The binary is cached outside the repo under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/tools/helm-<version>-<hash>/helm
# where <hash> covers hack/tools/helm/go.mod, go.sum and the Go version, so it is rebuilt only
# when the pins or the toolchain change. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/helm
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" { print $3 }' "$mod/go.mod")
key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/tools/helm-$version-$key"
bin="$cache/helm"

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	tmp=$(mktemp "$cache/helm.tmp.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	start=$SECONDS
	echo "[helm] building helm $version from $mod (a few minutes on 2 cores the first time)" >&2
	# The ldflags of helm's own Makefile: its version, and the Kubernetes version that
	# `helm template` and `helm lint` assume (client-go v0.X.Y is Kubernetes 1.X).
	kube=$(cd "$mod" && go list -m -f '{{.Version}}' k8s.io/client-go)
	minor=$(echo "$kube" | cut -d. -f2)
	ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
	for p in pkg/lint/rules pkg/chartutil; do
		ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
	done
	(cd "$mod" && go build -ldflags "$ldflags" -o "$tmp" helm.sh/helm/v3/cmd/helm)
	chmod +x "$tmp"
	mv -f "$tmp" "$bin"
	echo "[helm] built in $((SECONDS - start))s: $bin" >&2
fi
echo "$bin"
