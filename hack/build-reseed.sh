#!/usr/bin/env bash
# Builds agentplane-reseed.node (hack/reseed/reseed.c: the Node-API addon that reseeds OpenSSL
# in a gateway restored from a template) with the system's gcc and links it into the directory
# given as $1 (default bin). Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/agentplane/reseed/<key>,
# keyed by the source and the compiler. `--print-dir` prints the cache dir.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/cache.sh
cache="$cache_root/reseed/$( { cat hack/reseed/reseed.c; gcc --version | head -1; } | cache_key)"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$cache"
  exit 0
fi
out="${1:-bin}"
name=agentplane-reseed.node
if ! all_cached "$cache" "$name"; then
  mkdir -p "$cache"
  tmp=$(mktemp "$cache/$name.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  gcc -shared -fPIC -O2 -Wall -Werror -o "$tmp" hack/reseed/reseed.c
  chmod 0755 "$tmp"
  mv -f "$tmp" "$cache/$name"
  echo "[reseed] built $cache/$name" >&2
fi
link_cached "$cache" "$out" "$name"
