#!/usr/bin/env bash
# Builds golangci-lint from the Go module pinned in hack/tools/golangci-lint (never a downloaded
# release) and prints the path of the binary on stdout; `make lint` runs it.
#
# The binary is cached outside the repo under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/tools/golangci-lint-<version>-<hash>/golangci-lint
# where <hash> covers hack/tools/golangci-lint/go.mod, go.sum and the Go version, so it is
# rebuilt only when the pins or the toolchain change. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/golangci-lint
version=$(awk '$1 == "require" && $2 == "github.com/golangci/golangci-lint/v2" { print $3 }' "$mod/go.mod")
key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/tools/golangci-lint-$version-$key"
bin="$cache/golangci-lint"

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	tmp=$(mktemp "$cache/golangci-lint.tmp.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	start=$SECONDS
	echo "[golangci-lint] building golangci-lint $version from $mod (a few minutes on 2 cores the first time)" >&2
	(cd "$mod" && go build -ldflags "-X main.version=$version" -o "$tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
	chmod +x "$tmp"
	mv -f "$tmp" "$bin"
	echo "[golangci-lint] built in $((SECONDS - start))s: $bin" >&2
fi
echo "$bin"
