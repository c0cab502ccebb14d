#!/usr/bin/env bash
# Builds golangci-lint from the Go module pinned in hack/tools/golangci-lint (never a downloaded
# release) and prints the path of the binary on stdout; `make lint` runs it. Cached under the
# user cache, keyed by the pins and the Go version (go_tool in hack/lib/cache.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/cache.sh
mod=hack/tools/golangci-lint
version=$(awk '$1 == "require" && $2 == "github.com/golangci/golangci-lint/v2" { print $3 }' "$mod/go.mod")
go_tool golangci-lint "$version" "$mod" github.com/golangci/golangci-lint/v2/cmd/golangci-lint -ldflags "-X main.version=$version"
