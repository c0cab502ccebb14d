#!/usr/bin/env bash
# Builds helm from the Go module pinned in hack/tools/helm (never a downloaded release) and
# prints the path of the binary on stdout; `make helm` links it as bin/helm. Cached under the
# user cache, keyed by the pins and the Go version (go_tool in hack/lib/cache.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/cache.sh
mod=hack/tools/helm
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" { print $3 }' "$mod/go.mod")
# The ldflags of helm's own Makefile: its version, and the Kubernetes version that
# `helm template` and `helm lint` assume (client-go v0.X.Y is Kubernetes 1.X).
kube=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$mod/go.mod")
minor=$(echo "$kube" | cut -d. -f2)
ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
for p in pkg/lint/rules pkg/chartutil; do
	ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
done
go_tool helm "$version" "$mod" helm.sh/helm/v3/cmd/helm -ldflags "$ldflags"
