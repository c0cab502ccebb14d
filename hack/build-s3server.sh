#!/usr/bin/env bash
# Builds the S3-compatible test server pinned in hack/tools/s3server (versitygw,
# run with its posix backend) and prints the path of the binary on stdout.
#
# The binary is cached outside the repo under
#   ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/s3server/<hash>/versitygw
# where <hash> covers hack/tools/s3server/go.mod, go.sum and the Go version, so
# it is rebuilt only when the pins or the toolchain change. Progress goes to
# stderr. Used by internal/adapters/storage/s3 tests (unless AGENTPLANE_S3SERVER names a
# binary already).
#
# Run it by hand:
#   bin=$(hack/build-s3server.sh)
#   ROOT_ACCESS_KEY=k ROOT_SECRET_KEY=s "$bin" --port 127.0.0.1:9000 posix /tmp/s3data
set -euo pipefail
cd "$(dirname "$0")/.."
mod=hack/tools/s3server
key=$( { cat "$mod/go.mod" "$mod/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/s3server/$key"
bin="$cache/versitygw"

log() { echo "[s3server] $*" >&2; }

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	tmp=$(mktemp "$cache/versitygw.tmp.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	start=$SECONDS
	log "building versitygw from $mod (a few minutes on 2 cores the first time)"
	(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" github.com/versity/versitygw/cmd/versitygw)
	chmod +x "$tmp"
	mv -f "$tmp" "$bin"
	log "built in $((SECONDS - start))s: $bin"
fi
echo "$bin"
